"""The trace picture of docs/observability.md is rendered from real spans: a producing
service's send, a consuming service's poll, process (with the application's spans under
it, one a send of its own) and commit, drawn as a tracing backend draws them."""

from __future__ import annotations

import re
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan

from kafkette import Consumer, Producer, TopicPartition
from kafkette.testing import MemoryCluster
from tests.observability.conftest import Telemetry, parent_id, span_id

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
MARKER = "<!-- trace-picture -->"


def render(spans: list[ReadableSpan]) -> str:
    """Each root span and its children by start time, as a tree: name, kind, where the
    record went or came from, and the spans it links to."""
    names = {span_id(s): s.name for s in spans}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        children.setdefault(parent_id(span), []).append(span)
    lines: list[str] = []

    def detail(span: ReadableSpan) -> str:
        attributes = span.attributes or {}
        parts = []
        if "messaging.kafka.offset" in attributes:
            parts.append(
                f"{attributes['messaging.destination.name']}/"
                f"{attributes['messaging.destination.partition.id']} @ "
                f"{attributes['messaging.kafka.offset']}"
            )
        elif "messaging.batch.message_count" in attributes:
            count = attributes["messaging.batch.message_count"]
            parts.append(f"{count} message{'s' if count != 1 else ''}")
        elif attributes.get("messaging.operation.type") == "settle":
            parts.append(f"group {attributes['messaging.consumer.group.name']}")
        parts += [f"┄┄ link → {names[link.context.span_id]}" for link in span.links]
        return "  ".join(parts)

    def draw(span: ReadableSpan, prefix: str, branch: str) -> None:
        head = f"{prefix}{branch}{span.name}"
        lines.append(f"{head:<29}{span.kind.name:<10}{detail(span)}".rstrip())
        below = children.get(span_id(span), [])
        inner = prefix + ("    " if branch in ("", "└── ") else "│   ")
        for index, child in enumerate(below):
            draw(child, inner if branch else prefix, "└── " if index == len(below) - 1 else "├── ")

    for root in children.get(None, []):
        draw(root, "", "")
    return "\n".join(lines)


def documented() -> str:
    text = DOC.read_text()
    found = re.search(re.escape(MARKER) + r"\n```text\n(.*?)```", text, re.S)
    assert found is not None, f"no text block after {MARKER} in {DOC}"
    return found.group(1).rstrip("\n")


def test_the_documented_trace_is_what_the_clients_record(telemetry: Telemetry) -> None:
    shop = telemetry.tracer_provider.get_tracer("shop")
    with MemoryCluster() as cluster:
        settings = {"bootstrap_servers": cluster.bootstrap_servers, **telemetry.settings}
        with Producer(**settings) as producer, shop.start_as_current_span("checkout"):
            producer.send("orders", b"order 1", key=b"customer-7").result(10)
        with (
            Consumer(**settings, group_id="billing", auto_offset_reset="earliest") as consumer,
            Producer(**settings) as receipts,
        ):
            consumer.assign([TopicPartition("orders", 0)])
            with shop.start_as_current_span("handle-batch"):
                for record in consumer:
                    with shop.start_as_current_span("charge-card"):
                        pass
                    receipts.send("receipts", record.value, key=record.key).result(10)
                    break
            consumer.commit()
    picture = render(telemetry.spans())
    assert picture == documented(), f"docs/observability.md should show:\n{picture}"
