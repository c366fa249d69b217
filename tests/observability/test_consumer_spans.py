"""The consumer's spans: ``poll`` (receive) linked to the records' creation contexts,
``process`` per record of the iteration, ``commit`` (settle); sync, asyncio and trio."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from kafkette import AsyncConsumer, Consumer, ConsumerRecord, Producer, TopicPartition
from kafkette.testing import MemoryCluster
from tests.observability.conftest import Telemetry, links, parent_id, span_id

API = ["sync", "asyncio", "trio"]
P0, P1 = TopicPartition("orders", 0), TopicPartition("orders", 1)

CONSUMER = {
    "messaging.system": "kafka",
    "messaging.consumer.group.name": "g",
    "messaging.client.id": "kafkette",
}


def produce(cluster: MemoryCluster, telemetry: Telemetry) -> dict[tuple[int, int], int]:
    """Two traced records to partition 0 and one to partition 1, then one untraced to
    partition 1; the span id of each traced record's send by (partition, offset)."""
    with Producer(bootstrap_servers=cluster.bootstrap_servers, **telemetry.settings) as p:
        for key, partition in ((b"a", 0), (b"b", 0), (None, 1)):
            p.send("orders", b"v", key=key, partition=partition)
        p.flush(10)
    with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
        p.send("orders", b"plain", partition=1).result(10)
    sends = telemetry.spans("send orders")
    telemetry.exporter.clear()
    return {
        (
            int(s.attributes["messaging.destination.partition.id"]),  # type: ignore[index,arg-type]
            s.attributes["messaging.kafka.offset"],  # type: ignore[index]
        ): span_id(s)
        for s in sends
    }


def consumer_settings(cluster: MemoryCluster, telemetry: Telemetry) -> dict[str, Any]:
    return {
        "bootstrap_servers": cluster.bootstrap_servers,
        "group_id": "g",
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        **telemetry.settings,
    }


def poll_all(api: str, settings: dict[str, Any], wanted: int) -> list[list[ConsumerRecord]]:
    """Assign both partitions and poll until ``wanted`` records came; each poll's records
    (empty polls left out); then commit."""
    polls: list[list[ConsumerRecord]] = []

    def note(batch: dict[TopicPartition, list[ConsumerRecord]]) -> None:
        if batch:
            polls.append([r for tp in sorted(batch) for r in batch[tp]])

    if api == "sync":
        with Consumer(**settings) as consumer:
            consumer.assign([P0, P1])
            while sum(map(len, polls)) < wanted:
                note(consumer.poll(timeout=5))
            consumer.commit()
        return polls

    async def main() -> None:
        async with AsyncConsumer(**settings) as consumer:
            consumer.assign([P0, P1])
            while sum(map(len, polls)) < wanted:
                note(await consumer.poll(timeout=5))
            await consumer.commit()

    anyio.run(main, backend=api)
    return polls


@pytest.mark.parametrize("api", API)
def test_a_poll_is_a_receive_span_linked_to_each_record_creation(
    api: str, telemetry: Telemetry
) -> None:
    """Each poll that returns records is a CLIENT span (``poll orders``, operation type
    receive, the batch's count; the partition when it is one) with a link per record that
    carries a creation context, its partition and offset on the link; a commit of both
    partitions is a ``commit orders`` CLIENT span (settle)."""
    with MemoryCluster(num_partitions=2) as cluster:
        sent = produce(cluster, telemetry)
        polls = poll_all(api, consumer_settings(cluster, telemetry), 4)
    spans = telemetry.spans("poll orders")
    assert len(spans) == len(polls)
    for span, records in zip(spans, polls, strict=True):
        partitions = {r.partition for r in records}
        expected = {
            **CONSUMER,
            "messaging.operation.name": "poll",
            "messaging.operation.type": "receive",
            "messaging.batch.message_count": len(records),
            "messaging.destination.name": "orders",
        }
        if len(partitions) == 1:
            expected["messaging.destination.partition.id"] = str(partitions.pop())
        assert (span.kind, dict(span.attributes or {}), parent_id(span)) == (
            SpanKind.CLIENT,
            expected,
            None,
        )
        assert links(span) == [
            (
                sent[(r.partition, r.offset)],
                {
                    "messaging.destination.name": "orders",
                    "messaging.destination.partition.id": str(r.partition),
                    "messaging.kafka.offset": r.offset,
                },
            )
            for r in records
            if (r.partition, r.offset) in sent
        ]
    assert sorted((r.partition, r.offset) for records in polls for r in records) == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]
    (commit,) = telemetry.spans("commit orders")
    assert (commit.kind, dict(commit.attributes or {}), commit.status.status_code) == (
        SpanKind.CLIENT,
        {
            **CONSUMER,
            "messaging.operation.name": "commit",
            "messaging.operation.type": "settle",
            "messaging.destination.name": "orders",
        },
        StatusCode.UNSET,
    )


def test_the_sync_iteration_processes_each_record_in_a_current_span(
    telemetry: Telemetry,
) -> None:
    """``for record in consumer``: a ``process orders`` CONSUMER span per record, child of
    the span around the loop, linked to the record's send, current while the body runs
    (the application's span is its child); after ``break`` the loop's span is current
    again and the last record's span ended."""
    app = telemetry.tracer_provider.get_tracer("app")
    with MemoryCluster(num_partitions=2) as cluster:
        sent = produce(cluster, telemetry)
        seen = []
        with Consumer(**consumer_settings(cluster, telemetry)) as consumer:
            consumer.assign([P0])
            with app.start_as_current_span("loop") as loop:
                for record in consumer:
                    with app.start_as_current_span("work"):
                        seen.append((record.partition, record.offset))
                    if len(seen) == 2:
                        break
                assert trace.get_current_span() is loop
    processes = telemetry.spans("process orders")
    works = telemetry.spans("work")
    (loop_span,) = telemetry.spans("loop")
    assert seen == [(0, 0), (0, 1)]
    assert [(s.kind, parent_id(s), links(s), dict(s.attributes or {})) for s in processes] == [
        (
            SpanKind.CONSUMER,
            span_id(loop_span),
            [(sent[(0, offset)], {})],
            {
                **CONSUMER,
                "messaging.operation.name": "process",
                "messaging.operation.type": "process",
                "messaging.destination.name": "orders",
                "messaging.destination.partition.id": "0",
                "messaging.kafka.offset": offset,
                "messaging.kafka.message.key": key,
            },
        )
        for offset, key in ((0, "a"), (1, "b"))
    ]
    assert [parent_id(w) for w in works] == [span_id(p) for p in processes]
    (poll,) = telemetry.spans("poll orders")
    assert parent_id(poll) == span_id(loop_span)


@pytest.mark.parametrize("api", ["asyncio", "trio"])
def test_the_async_iteration_processes_each_record_in_a_span(
    api: str, telemetry: Telemetry
) -> None:
    """``async for record in consumer``: a ``process orders`` span per record, from the
    moment it is handed out to the request for the next (the last one to close), linked
    to its send; not made current (the application's span stays the loop's child)."""
    app = telemetry.tracer_provider.get_tracer("app")

    async def main() -> list[tuple[int, int]]:
        seen = []
        async with AsyncConsumer(**consumer_settings(cluster, telemetry)) as consumer:
            consumer.assign([P1])
            with app.start_as_current_span("loop"):
                async for record in consumer:
                    with app.start_as_current_span("work"):
                        seen.append((record.partition, record.offset))
                    if len(seen) == 2:
                        break
            assert len(telemetry.spans("process orders")) == 1  # the second one is open
        return seen

    with MemoryCluster(num_partitions=2) as cluster:
        sent = produce(cluster, telemetry)
        seen = anyio.run(main, backend=api)
    processes = telemetry.spans("process orders")
    (loop_span,) = telemetry.spans("loop")
    assert seen == [(1, 0), (1, 1)]
    assert [(parent_id(s), links(s)) for s in processes] == [
        (span_id(loop_span), [(sent[(1, 0)], {})]),
        (span_id(loop_span), []),  # a record sent without tracing has no creation context
    ]
    assert [parent_id(w) for w in telemetry.spans("work")] == [span_id(loop_span)] * 2
    assert "messaging.kafka.message.key" not in processes[0].attributes  # type: ignore[operator]


@pytest.mark.parametrize("api", API)
def test_a_commit_span_is_a_child_of_the_callers_span(api: str, telemetry: Telemetry) -> None:
    """``commit()`` inside the application's span: the commit span is its child, also for
    the sync consumer, whose commit runs in its event loop's thread."""
    app = telemetry.tracer_provider.get_tracer("app")
    with MemoryCluster() as cluster:
        with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
            producer.send("orders", b"v").result(10)  # the topic, for the commit
        settings = consumer_settings(cluster, telemetry)
        if api == "sync":
            with Consumer(**settings) as consumer, app.start_as_current_span("save"):
                consumer.commit({P0: 0})
        else:

            async def main() -> None:
                async with AsyncConsumer(**settings) as consumer:
                    with app.start_as_current_span("save"):
                        await consumer.commit({P0: 0})

            anyio.run(main, backend=api)
    (save,) = telemetry.spans("save")
    (commit,) = telemetry.spans("commit orders")
    assert (parent_id(commit), commit.attributes["messaging.destination.partition.id"]) == (  # type: ignore[index]
        span_id(save),
        "0",
    )


@pytest.mark.parametrize(
    "headers",
    [
        (),
        (("traceparent", None),),
        (("traceparent", b"\xff\xfe"),),  # not UTF-8
        (("traceparent", b"00-not-a-trace-context"),),
        (("traceparent", b"00-00000000000000000000000000000000-0000000000000000-01"),),
        (("other", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),),
    ],
)
def test_a_record_without_a_valid_creation_context_has_no_link(
    headers: tuple[tuple[str, bytes | None], ...],
) -> None:
    """Headers from any producer are read without failing: a missing, null, non-UTF-8,
    malformed or all-zero traceparent is no creation context."""
    from kafkette.otel.consumer import creation_context

    record = ConsumerRecord("orders", 0, 0, 0, None, b"v", headers, 0, None)
    assert creation_context(record) is None


def test_the_last_traceparent_header_is_the_creation_context() -> None:
    """Of two traceparent headers, the last is read (Kafka's Headers.lastHeader)."""
    from kafkette.otel.consumer import creation_context

    first = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    last = b"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
    record = ConsumerRecord(
        "orders", 0, 0, 0, None, b"v", (("traceparent", first), ("traceparent", last)), 0, None
    )
    found = creation_context(record)
    assert found is not None
    assert (found.trace_id, found.span_id) == (
        0x0AF7651916CD43DD8448EB211C80319C,
        0x00F067AA0BA902B7,
    )
