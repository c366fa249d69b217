"""A transactional consume-transform-produce loop, traced end to end: the upstream sends,
the loop's receive and process spans, its transactional sends, the downstream receive."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from kafkette import AsyncConsumer, AsyncProducer, Consumer, Producer, TopicPartition
from kafkette.testing import MemoryCluster
from tests.observability.conftest import Telemetry, links, parent_id, span_id

IN, OUT = TopicPartition("in", 0), TopicPartition("out", 0)


def copy_sync(settings: dict[str, Any]) -> None:
    """Read ``in`` and write each value upper-cased to ``out`` in one transaction,
    committing the consumed offsets with it; each send in its record's process span."""
    with (
        Consumer(
            **settings,
            group_id="copier",
            isolation_level="read_committed",
            auto_offset_reset="earliest",
        ) as consumer,
        Producer(**settings, transactional_id="copier-1") as producer,
    ):
        consumer.assign([IN])
        producer.init_transactions()
        producer.begin_transaction()
        for record in consumer:
            producer.send("out", record.value.upper(), key=record.key)
            if record.offset == 2:
                break
        producer.send_offsets_to_transaction({IN: 3}, consumer.group_metadata())
        producer.commit_transaction()


async def copy_async(settings: dict[str, Any]) -> None:
    """As :func:`copy_sync`, by polling."""
    async with (
        AsyncConsumer(
            **settings,
            group_id="copier",
            isolation_level="read_committed",
            auto_offset_reset="earliest",
        ) as consumer,
        AsyncProducer(**settings, transactional_id="copier-1") as producer,
    ):
        consumer.assign([IN])
        await producer.init_transactions()
        producer.begin_transaction()
        copied = 0
        while copied < 3:
            for record in (await consumer.poll(timeout=5)).get(IN, []):
                await producer.send("out", record.value.upper(), key=record.key)
                copied += 1
        await producer.send_offsets_to_transaction({IN: 3}, consumer.group_metadata())
        await producer.commit_transaction()


@pytest.mark.parametrize("api", ["sync", "asyncio", "trio"])
def test_a_transactional_copy_is_traced_from_end_to_end(api: str, telemetry: Telemetry) -> None:
    """The loop's receive spans link to the upstream sends; its transactional sends carry
    their own context to ``out`` (children of each record's process span in the sync
    iteration); a read_committed reader of ``out`` links to them once committed."""
    with MemoryCluster() as cluster:
        settings = {"bootstrap_servers": cluster.bootstrap_servers, **telemetry.settings}
        with Producer(**settings) as upstream:
            for key in (b"a", b"b", b"c"):
                upstream.send("in", b"v-" + key, key=key)
            upstream.flush(10)
        if api == "sync":
            copy_sync(settings)
        else:
            anyio.run(copy_async, settings, backend=api)
        with Consumer(
            **settings, auto_offset_reset="earliest", isolation_level="read_committed"
        ) as reader:
            reader.assign([OUT])
            copied = []
            while len(copied) < 3:
                copied += reader.poll(timeout=5).get(OUT, [])
        assert cluster.committed("copier") == {IN: 3}
    assert [(r.offset, r.key, r.value) for r in copied] == [
        (0, b"a", b"V-A"),
        (1, b"b", b"V-B"),
        (2, b"c", b"V-C"),
    ]
    sends_in = {s.attributes["messaging.kafka.offset"]: s for s in telemetry.spans("send in")}  # type: ignore[index]
    sends_out = {s.attributes["messaging.kafka.offset"]: s for s in telemetry.spans("send out")}  # type: ignore[index]
    assert sorted(sends_in) == sorted(sends_out) == [0, 1, 2]
    received = [link for span in telemetry.spans("poll in") for link, _ in links(span)]
    assert received == [span_id(sends_in[offset]) for offset in range(3)]
    delivered = [link for span in telemetry.spans("poll out") for link, _ in links(span)]
    assert delivered == [span_id(sends_out[offset]) for offset in range(3)]
    if api == "sync":
        processes = telemetry.spans("process in")
        assert [links(p) for p in processes] == [
            [(span_id(sends_in[offset]), {})] for offset in range(3)
        ]
        assert [parent_id(sends_out[offset]) for offset in range(3)] == [
            span_id(p) for p in processes
        ]
    # the offsets go with the transaction (the producer's call), not through commit()
    assert [s.name for s in telemetry.spans() if s.name.startswith("commit")] == []
