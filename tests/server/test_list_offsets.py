"""ListOffsets, DeleteRecords and OffsetForLeaderEpoch, in process."""

from __future__ import annotations

import pytest

from kafkette.protocol.messages import (
    DeleteRecordsRequest,
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
)
from kafkette.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsTopic,
)
from kafkette.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from kafkette.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kafkette.protocol.records import RecordBatchBuilder
from kafkette.server import Broker
from tests.server.dataplane import NOW, FakeClock, batch, call, fetch_request, make_broker, produce

pytestmark = pytest.mark.anyio


async def timed_broker() -> Broker:
    """Offsets 0..5 with timestamps NOW+0, +10, +20, +20 (max, offset 3 first), +5, +20."""
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    builder = RecordBatchBuilder()
    for delta in (0, 10, 20):
        builder.append(NOW + delta, b"k", b"v")
    assert (await produce(broker, "t", 0, builder.build())).error_code == 0
    builder = RecordBatchBuilder()
    for delta in (30, 5, 30):
        builder.append(NOW + delta, b"k", b"v")
    assert (await produce(broker, "t", 0, builder.build())).error_code == 0
    return broker


async def list_offset(
    broker: Broker, timestamp: int, *, version: int = 9, isolation: int = 0, partition: int = 0
) -> tuple[int, int, int]:
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[ListOffsetsTopic("t", [ListOffsetsPartition(partition, timestamp=timestamp)])],
    )
    response = await call(broker, request, version)
    part = response.topics[0].partitions[0]
    if version == 0:
        return part.error_code, -1, part.old_style_offsets[0] if part.old_style_offsets else -1
    return part.error_code, part.timestamp, part.offset


async def test_earliest_latest_and_max_timestamp() -> None:
    broker = await timed_broker()
    assert await list_offset(broker, -2) == (0, -1, 0)
    assert await list_offset(broker, -1) == (0, -1, 6)
    assert await list_offset(broker, -3) == (0, NOW + 30, 3)
    assert await list_offset(broker, -4) == (0, -1, 0)


async def test_offset_for_timestamp_is_exact() -> None:
    broker = await timed_broker()
    assert await list_offset(broker, NOW) == (0, NOW, 0)
    assert await list_offset(broker, NOW + 1) == (0, NOW + 10, 1)
    assert await list_offset(broker, NOW + 20) == (0, NOW + 20, 2)
    assert await list_offset(broker, NOW + 21) == (0, NOW + 30, 3)
    assert await list_offset(broker, NOW + 31) == (0, -1, -1)


@pytest.mark.parametrize("version", [1, 2, 3, 4, 7, 10])
async def test_every_version_answers(version: int) -> None:
    broker = await timed_broker()
    assert await list_offset(broker, NOW + 1, version=version) == (0, NOW + 10, 1)


async def test_version_zero_old_style_offsets() -> None:
    broker = await timed_broker()
    assert await list_offset(broker, -1, version=0) == (0, -1, 6)
    assert await list_offset(broker, -2, version=0) == (0, -1, 0)


async def test_unknown_partition() -> None:
    broker = await timed_broker()
    assert (await list_offset(broker, -1, partition=3))[0] == 3


async def test_read_committed_latest_is_the_last_stable_offset() -> None:
    broker = await timed_broker()
    txn = batch(
        [(b"k", b"v")], producer_id=1, producer_epoch=0, base_sequence=0, transactional=True
    )
    assert (await produce(broker, "t", 0, txn, transactional_id="txn")).error_code == 0
    assert await list_offset(broker, -1, isolation=1) == (0, -1, 6)
    assert await list_offset(broker, -1, isolation=0) == (0, -1, 7)


async def delete_records(broker: Broker, offset: int) -> tuple[int, int]:
    request = DeleteRecordsRequest(
        topics=[DeleteRecordsTopic("t", [DeleteRecordsPartition(0, offset)])], timeout_ms=1000
    )
    part = (await call(broker, request, 2)).topics[0].partitions[0]
    return part.error_code, part.low_watermark


async def test_delete_records_moves_the_low_watermark() -> None:
    broker = await timed_broker()
    assert await delete_records(broker, 4) == (0, 4)
    assert await list_offset(broker, -2) == (0, -1, 4)
    assert await delete_records(broker, 7) == (1, -1)  # past the high watermark
    fetched = await call(broker, fetch_request("t", {0: 2}), 12)
    assert fetched.responses[0].partitions[0].error_code == 1
    assert fetched.responses[0].partitions[0].log_start_offset == 4
    assert await delete_records(broker, -1) == (0, 6)


async def test_delete_records_on_a_compacted_topic_is_a_policy_violation() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1, {"cleanup.policy": "compact"})
    await produce(broker, "t", 0, batch([(b"k", b"v"), (b"k", b"w")]))
    assert await delete_records(broker, 1) == (44, -1)
    assert broker.cluster.get_partition("t", 0).log.log_start_offset == 0


async def epoch_end(broker: Broker, epoch: int, current: int = -1) -> tuple[int, int, int]:
    request = OffsetForLeaderEpochRequest(
        replica_id=-1,
        topics=[OffsetForLeaderTopic("t", [OffsetForLeaderPartition(0, current, epoch)])],
    )
    part = (await call(broker, request, 4)).topics[0].partitions[0]
    return part.error_code, part.leader_epoch, part.end_offset


async def test_offset_for_leader_epoch() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    assert await epoch_end(broker, 0) == (0, -1, -1)  # nothing appended yet
    await produce(broker, "t", 0, batch([(b"k", b"v"), (b"k", b"w")]))
    assert await epoch_end(broker, 0) == (0, 0, 2)
    assert await epoch_end(broker, 0, current=0) == (0, 0, 2)
    assert await epoch_end(broker, 1) == (0, -1, -1)
    assert (await epoch_end(broker, 0, current=3))[0] == 75
