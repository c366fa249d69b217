"""The producer's ``send {topic}`` spans: attributes, parent, headers and errors, for the
sync producer and the async one on asyncio and trio."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from kafkette import AsyncProducer, Producer
from kafkette.errors import MessageTooLargeError, UnknownTopicOrPartitionError
from kafkette.testing import MemoryCluster
from tests.observability.conftest import Telemetry, links, parent_id, span_id, traceparent

API = ["sync", "asyncio", "trio"]

Send = tuple[Any, Any, list[tuple[str, bytes]] | None, int | None]
"""key, value, headers, partition"""

RECORDS: list[Send] = [
    (b"k1", b"v1", None, 1),
    (b"\xff", None, [("h", b"x")], 0),  # a key that is not text, a tombstone
    (None, b"v3", None, 1),
]

BASE = {
    "messaging.system": "kafka",
    "messaging.operation.name": "send",
    "messaging.operation.type": "send",
    "messaging.client.id": "kafkette",
    "messaging.destination.name": "orders",
}


def run_sends(
    api: str, settings: dict[str, Any], sends: list[Send], around: Callable[[], Any]
) -> list[BaseException | None]:
    """Send ``sends`` to ``orders`` inside the context ``around()`` with the given API;
    each record's delivery error or None."""
    if api == "sync":
        with Producer(**settings) as producer, around():
            futures = [producer.send("orders", v, k, h, p) for k, v, h, p in sends]
            producer.flush(10)
        return [f.exception(0) for f in futures]

    async def main() -> list[BaseException | None]:
        async with AsyncProducer(**settings) as producer:
            with around():
                futures = [await producer.send("orders", v, k, h, p) for k, v, h, p in sends]
            await producer.flush(10)
        return [f.exception(0) for f in futures]

    return anyio.run(main, backend=api)


@pytest.mark.parametrize("api", API)
def test_each_send_is_a_producer_span_ended_by_its_acknowledgement(
    api: str, telemetry: Telemetry
) -> None:
    """One ``send orders`` PRODUCER span per record, child of the caller's span, with the
    partition and offset of its acknowledgement; its context is the record's traceparent
    header, after the caller's headers."""
    tracer = telemetry.tracer_provider.get_tracer("app")
    with MemoryCluster(num_partitions=2) as cluster:
        settings = {"bootstrap_servers": cluster.bootstrap_servers, **telemetry.settings}
        errors = run_sends(api, settings, RECORDS, lambda: tracer.start_as_current_span("request"))
        assert errors == [None, None, None]
        stored = {(r.partition, r.offset): r for r in cluster.records("orders")}
    (request,) = telemetry.spans("request")
    sends = telemetry.spans("send orders")
    assert [(s.kind, parent_id(s), links(s), s.status.status_code) for s in sends] == [
        (SpanKind.PRODUCER, span_id(request), [], StatusCode.UNSET)
    ] * 3
    by_offset = sorted(
        sends,
        key=lambda s: (
            s.attributes["messaging.destination.partition.id"],  # type: ignore[index]
            s.attributes["messaging.kafka.offset"],  # type: ignore[index]
        ),
    )
    assert [dict(s.attributes or {}) for s in by_offset] == [
        {
            **BASE,
            "messaging.kafka.message.tombstone": True,
            "messaging.destination.partition.id": "0",
            "messaging.kafka.offset": 0,
        },
        {
            **BASE,
            "messaging.kafka.message.key": "k1",
            "messaging.destination.partition.id": "1",
            "messaging.kafka.offset": 0,
        },
        {**BASE, "messaging.destination.partition.id": "1", "messaging.kafka.offset": 1},
    ]
    assert [stored[(0, 0)].headers, stored[(1, 0)].headers, stored[(1, 1)].headers] == [
        (("h", b"x"), ("traceparent", traceparent(by_offset[0]))),
        (("traceparent", traceparent(by_offset[1])),),
        (("traceparent", traceparent(by_offset[2])),),
    ]


@pytest.mark.parametrize("api", API)
def test_a_failed_delivery_ends_the_span_with_the_kafka_error(
    api: str, telemetry: Telemetry
) -> None:
    """A record the broker refuses ends its span with error.type MESSAGE_TOO_LARGE, its
    partition, the exception recorded and the status ERROR; the one beside it is not
    touched."""
    with MemoryCluster(num_partitions=2, message_max_bytes=1000) as cluster:
        settings = {"bootstrap_servers": cluster.bootstrap_servers, **telemetry.settings}
        sends: list[Send] = [(None, b"x" * 3000, None, 0), (None, b"ok", None, 1)]
        errors = run_sends(api, settings, sends, _nothing)
    assert [type(e) for e in errors] == [MessageTooLargeError, type(None)]
    failed, sent = sorted(
        telemetry.spans("send orders"), key=lambda s: "error.type" not in s.attributes
    )  # type: ignore[operator]
    # the partition was chosen before the broker refused the record: the span says which
    assert dict(failed.attributes or {}) == {
        **BASE,
        "messaging.destination.partition.id": "0",
        "error.type": "MESSAGE_TOO_LARGE",
    }
    assert failed.status.status_code == StatusCode.ERROR
    assert [e.attributes["exception.type"] for e in failed.events] == [  # type: ignore[index]
        "kafkette.errors.MessageTooLargeError"
    ]
    assert sent.status.status_code == StatusCode.UNSET
    assert sent.attributes["messaging.kafka.offset"] == 0  # type: ignore[index]


@pytest.mark.parametrize("api", API)
def test_a_send_that_raises_ends_its_span_with_the_error(api: str, telemetry: Telemetry) -> None:
    """A send that raises (a partition the topic does not have) ends its span at once with
    the error; no partition, no offset."""
    with MemoryCluster() as cluster:
        settings = {
            "bootstrap_servers": cluster.bootstrap_servers,
            "max_block_ms": 300,
            **telemetry.settings,
        }
        with pytest.raises(UnknownTopicOrPartitionError):
            run_sends(api, settings, [(b"k", b"v", None, 0), (b"k", b"v", None, 5)], _nothing)
    spans = sorted(telemetry.spans("send orders"), key=lambda s: "error.type" not in s.attributes)  # type: ignore[operator]
    assert [dict(s.attributes or {}) for s in spans] == [
        {
            **BASE,
            "messaging.kafka.message.key": "k",
            "error.type": "UNKNOWN_TOPIC_OR_PARTITION",
        },
        {
            **BASE,
            "messaging.kafka.message.key": "k",
            "messaging.destination.partition.id": "0",
            "messaging.kafka.offset": 0,
        },
    ]
    assert [s.status.status_code for s in spans] == [StatusCode.ERROR, StatusCode.UNSET]


def test_a_traceparent_the_caller_set_is_kept_and_linked(telemetry: Telemetry) -> None:
    """A record that carries its creation context already (the conventions' custom
    creation context) keeps it: the send span links to it instead of replacing it."""
    given = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with MemoryCluster() as cluster:
        settings = {"bootstrap_servers": cluster.bootstrap_servers, **telemetry.settings}
        run_sends("sync", settings, [(None, b"v", [("traceparent", given)], None)], _nothing)
        (record,) = cluster.records("orders")
    assert record.headers == (("traceparent", given),)
    (span,) = telemetry.spans("send orders")
    assert links(span) == [(0xB7AD6B7169203331, {})]
    assert span.links[0].context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C


def test_the_common_send_is_left_when_telemetry_is_on(telemetry: Telemetry) -> None:
    """A plain send (no headers, partition or callback) still gets its span: with telemetry
    the producer does not take the common send, which has no hook."""
    with MemoryCluster() as cluster:
        with Producer(bootstrap_servers=cluster.bootstrap_servers, **telemetry.settings) as p:
            assert p._core.routes.plain is False
            p.send("orders", b"v").result(10)
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
            assert p._core.telemetry is None
            assert p._core.routes.plain is True
    assert len(telemetry.spans("send orders")) == 1


def _nothing() -> Any:
    import contextlib

    return contextlib.nullcontext()


def test_mapping_headers_get_the_context_and_a_bad_header_ends_the_span(
    telemetry: Telemetry,
) -> None:
    """Headers given as a mapping (str values) keep their values beside the traceparent;
    a header the producer refuses (an int) raises SerializationError as without
    telemetry, and the span ends with that error."""
    from kafkette.errors import SerializationError

    with MemoryCluster() as cluster:
        with Producer(bootstrap_servers=cluster.bootstrap_servers, **telemetry.settings) as p:
            p.send("orders", b"v", headers={"source": "web"}).result(10)
            with pytest.raises(SerializationError):
                p.send("orders", b"v", headers={"count": 3})
        (record,) = cluster.records("orders")
    sent, refused = sorted(
        telemetry.spans("send orders"), key=lambda s: "error.type" in s.attributes
    )  # type: ignore[operator]
    assert record.headers == (("source", b"web"), ("traceparent", traceparent(sent)))
    assert refused.attributes["error.type"] == "SERIALIZATION"  # type: ignore[index]
