"""The commits the application does not wait for are traced as ``commit()`` is:
``commit_async``, auto commits and the commit on close are each a ``commit {topic}``
CLIENT span (settle) with a duration point; ``poll_batches`` makes ``poll {topic}`` spans
counting its batches' records. Sync, asyncio and trio."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from kafkette import AsyncConsumer, Consumer, Producer, TopicPartition
from kafkette.structs import OffsetAndMetadata
from kafkette.testing import MemoryCluster
from tests.observability.conftest import Telemetry

API = ["sync", "asyncio", "trio"]
P0 = TopicPartition("orders", 0)

COMMIT = {
    "messaging.system": "kafka",
    "messaging.consumer.group.name": "g",
    "messaging.client.id": "kafkette",
    "messaging.operation.name": "commit",
    "messaging.operation.type": "settle",
    "messaging.destination.name": "orders",
    "messaging.destination.partition.id": "0",
}


def produce(cluster: MemoryCluster, count: int) -> None:
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
        for i in range(count):
            producer.send("orders", b"%d" % i, partition=0)
        producer.flush(10)


def settings(cluster: MemoryCluster, telemetry: Telemetry, **more: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": cluster.bootstrap_servers,
        "group_id": "g",
        "auto_offset_reset": "earliest",
        **telemetry.settings,
        **more,
    }


def commit_spans(telemetry: Telemetry) -> list[dict[str, Any]]:
    spans = telemetry.spans("commit orders")
    assert all(s.kind is SpanKind.CLIENT for s in spans)
    assert all(s.status.status_code is StatusCode.UNSET for s in spans)
    return [dict(s.attributes or {}) for s in spans]


def commit_durations(telemetry: Telemetry) -> int:
    return sum(
        count
        for attrs, count in telemetry.points("messaging.client.operation.duration")
        if attrs["messaging.operation.name"] == "commit"
    )


@pytest.mark.parametrize("api", API)
def test_commit_async_is_a_commit_span(api: str, telemetry: Telemetry) -> None:
    """``commit_async`` of one partition: one span, ended before its callback runs."""
    done: list[tuple[dict[TopicPartition, OffsetAndMetadata], Exception | None, int]] = []

    def callback(offsets: dict[TopicPartition, OffsetAndMetadata], error: Exception | None) -> None:
        done.append((offsets, error, len(telemetry.spans("commit orders"))))

    with MemoryCluster() as cluster:
        produce(cluster, 1)
        config = settings(cluster, telemetry, enable_auto_commit=False)
        if api == "sync":
            with Consumer(**config) as consumer:
                consumer.assign([P0])
                consumer.commit_async({P0: 1}, callback)
                deadline = time.monotonic() + 10
                while not done and time.monotonic() < deadline:
                    consumer.poll(timeout=0.05)
        else:

            async def main() -> None:
                async with AsyncConsumer(**config) as consumer:
                    consumer.assign([P0])
                    consumer.commit_async({P0: 1}, callback)
                    with anyio.fail_after(10):
                        while not done:
                            await consumer.poll(timeout=0.05)

            anyio.run(main, backend=api)
    assert done == [({P0: OffsetAndMetadata(1)}, None, 1)]
    assert commit_spans(telemetry) == [COMMIT]
    assert commit_durations(telemetry) == 1


@pytest.mark.parametrize("api", API)
def test_auto_commits_and_the_commit_on_close_are_commit_spans(
    api: str, telemetry: Telemetry
) -> None:
    """A subscribed member with auto commit every 10 ms: its background commits and the
    one on close are ``commit orders`` spans, each its own duration point."""
    with MemoryCluster() as cluster:
        produce(cluster, 3)
        config = settings(cluster, telemetry, enable_auto_commit=True, auto_commit_interval_ms=10)
        if api == "sync":
            with Consumer(**config) as consumer:
                consumer.subscribe(["orders"])
                got, deadline = 0, time.monotonic() + 20
                while got < 3 or not telemetry.spans("commit orders"):
                    assert time.monotonic() < deadline
                    got += sum(map(len, consumer.poll(timeout=0.05).values()))
        else:

            async def main() -> None:
                async with AsyncConsumer(**config) as consumer:
                    consumer.subscribe(["orders"])
                    got = 0
                    with anyio.fail_after(20):
                        while got < 3 or not telemetry.spans("commit orders"):
                            got += sum(map(len, (await consumer.poll(timeout=0.05)).values()))

            anyio.run(main, backend=api)
        committed = cluster.committed("g")
    spans = commit_spans(telemetry)
    assert len(spans) >= 2  # at least one auto commit, and the commit on close
    assert all(attrs == COMMIT for attrs in spans)
    assert commit_durations(telemetry) == len(spans)
    assert committed == {P0: 3}


@pytest.mark.parametrize("api", API)
def test_poll_batches_is_a_receive_span_counting_its_records(
    api: str, telemetry: Telemetry
) -> None:
    """Five records in one batch, handed out whole: one ``poll orders`` span with
    batch count 5, and five consumed messages."""
    with MemoryCluster() as cluster:
        produce(cluster, 5)
        config = settings(cluster, telemetry, enable_auto_commit=False)
        batches: list[Any] = []
        if api == "sync":
            with Consumer(**config) as consumer:
                consumer.assign([P0])
                deadline = time.monotonic() + 20
                while not batches and time.monotonic() < deadline:
                    batches.extend(consumer.poll_batches(timeout=5).get(P0, []))
        else:

            async def main() -> None:
                async with AsyncConsumer(**config) as consumer:
                    consumer.assign([P0])
                    with anyio.fail_after(20):
                        while not batches:
                            batches.extend((await consumer.poll_batches(timeout=5)).get(P0, []))

            anyio.run(main, backend=api)
    assert [len(b.batch) for b in batches] == [5]
    (span,) = telemetry.spans("poll orders")
    assert span.kind is SpanKind.CLIENT
    assert dict(span.attributes or {}) == {
        "messaging.system": "kafka",
        "messaging.consumer.group.name": "g",
        "messaging.client.id": "kafkette",
        "messaging.operation.name": "poll",
        "messaging.operation.type": "receive",
        "messaging.batch.message_count": 5,
        "messaging.destination.name": "orders",
        "messaging.destination.partition.id": "0",
    }
    assert list(span.links) == []
    consumed = telemetry.points("messaging.client.consumed.messages")
    assert [count for _, count in consumed] == [5]
