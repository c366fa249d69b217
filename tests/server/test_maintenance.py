"""Retention and compaction run by the broker on an injected clock."""

from __future__ import annotations

import anyio
import pytest

from kafkette.protocol.messages import ListOffsetsRequest, ProduceRequest, ProduceResponse
from kafkette.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.messages.request_header import RequestHeader
from kafkette.protocol.records import RecordBatch, RecordBatchBuilder
from kafkette.server import Broker, BrokerConfig, RequestContext
from kafkette.server.maintenance import maintenance_loop, run_once


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _ctx(api_key: int, version: int) -> RequestContext:
    return RequestContext(RequestHeader(api_key, version, 1, "test"))


async def _produce(
    broker: Broker, topic: str, records: list[tuple[bytes | None, bytes | None]], ts: int
) -> int:
    builder = RecordBatchBuilder()
    for key, value in records:
        builder.append(ts, key, value)
    request = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[TopicProduceData(topic, [PartitionProduceData(0, builder.build())])],
    )
    response = await broker.handle(_ctx(0, 9), request)
    assert isinstance(response, ProduceResponse)
    result = response.responses[0].partition_responses[0]
    assert result.error_code == 0
    return result.base_offset


async def _earliest(broker: Broker, topic: str) -> int:
    request = ListOffsetsRequest(
        replica_id=-1, topics=[ListOffsetsTopic(topic, [ListOffsetsPartition(0, -1, -2, 1)])]
    )
    response = await broker.handle(_ctx(2, 7), request)
    return response.topics[0].partitions[0].offset  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_retention_by_time_deletes_old_segments() -> None:
    clock = Clock(1_000_000)
    broker = Broker(BrokerConfig(), clock=clock)
    broker.cluster.create_topic("t", 1, {"retention.ms": "10000", "segment.bytes": "1024"})
    for i in range(5):
        await _produce(broker, "t", [(None, b"x" * 600)], ts=int(clock.now) + i)
    assert await _earliest(broker, "t") == 0
    assert run_once(broker.cluster).segments_deleted == 0  # nothing is old yet
    clock.now += 60_000
    stats = run_once(broker.cluster)
    assert stats.segments_deleted == 4  # every segment but the active one
    assert stats.failures == 0
    assert await _earliest(broker, "t") == 4
    broker.close()


@pytest.mark.anyio
async def test_compaction_keeps_the_last_value_per_key() -> None:
    clock = Clock(1_000_000)
    broker = Broker(BrokerConfig(), clock=clock)
    broker.cluster.create_topic(
        "c",
        1,
        {"cleanup.policy": "compact", "segment.bytes": "1024", "min.cleanable.dirty.ratio": "0.01"},
    )
    for i in range(8):
        await _produce(
            broker, "c", [(b"k%d" % (i % 2), b"v%d" % i + b"." * 500)], ts=int(clock.now)
        )
    clock.now += 1000
    assert run_once(broker.cluster).logs_compacted == 1
    log = broker.cluster.get_partition("c", 0).log
    data = log.read(0, 1 << 20).to_bytes()
    survivors = []
    pos = 0
    while pos < len(data):
        batch = RecordBatch.from_buffer(data, pos)
        survivors += [(r.offset, r.key, r.value[:2]) for r in batch]
        pos += batch.header.size
    # the active segment is never cleaned; in cleaned segments only the last value per key stays
    cleaned = [s for s in survivors if s[0] < 6]
    assert {k for _, k, _ in cleaned} <= {b"k0", b"k1"}
    assert len(cleaned) <= 2
    assert [o for o, _, _ in survivors] == sorted(o for o, _, _ in survivors)
    broker.close()


@pytest.mark.anyio
async def test_loop_runs_on_schedule_and_stops_when_cancelled() -> None:
    broker = Broker(BrokerConfig(log_cleaner_backoff_ms=10, log_retention_check_interval_ms=10))
    broker.cluster.create_topic("t", 1, {"retention.ms": "1", "segment.bytes": "1024"})
    for _ in range(3):
        await _produce(broker, "t", [(None, b"y" * 700)], ts=0)
    with anyio.move_on_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(maintenance_loop, broker.cluster, broker.config, broker.now_ms)
            while await _earliest(broker, "t") == 0:
                await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert await _earliest(broker, "t") == 2
    broker.close()
