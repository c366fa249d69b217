"""Produce handler, in process: appends, acks, validation and per-partition errors."""

from __future__ import annotations

import struct

import pytest

from kafkette.backends.header import parse_header
from kafkette.protocol.messages import ProduceRequest
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.records import LegacyBatchBuilder
from kafkette.server.net.listener import CloseConnection
from tests.server.dataplane import (
    NOW,
    FakeClock,
    batch,
    call,
    fetch_request,
    make_broker,
    produce,
    produce_request,
    records_of,
)

pytestmark = pytest.mark.anyio


async def test_appends_and_answers_offsets() -> None:
    """Each batch gets the next offsets; the response carries base offset and log start."""
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 2)
    first = await produce(broker, "t", 1, batch([(b"a", b"1"), (b"b", b"2")]))
    second = await produce(broker, "t", 1, batch([(b"c", b"3")]))
    assert (first.error_code, first.base_offset, first.log_append_time_ms) == (0, 0, -1)
    assert (second.error_code, second.base_offset, second.log_start_offset) == (0, 2, 0)
    fetched = await call(broker, fetch_request("t", {1: 0}), 12)
    part = fetched.responses[0].partitions[0]
    assert part.high_watermark == 3
    assert [(r.offset, r.key, r.value) for r in records_of(part.records)] == [
        (0, b"a", b"1"),
        (1, b"b", b"2"),
        (2, b"c", b"3"),
    ]


async def test_acks_zero_has_no_response_but_appends() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    response = await call(broker, produce_request("t", 0, batch([(b"k", b"v")]), acks=0), 9)
    assert response is None
    assert broker.cluster.get_partition("t", 0).log.log_end_offset == 1


async def test_acks_zero_failure_closes_the_connection() -> None:
    """Kafka's only way to tell an acks=0 producer: drop the connection."""
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    with pytest.raises(CloseConnection, match="t-3"):
        await call(broker, produce_request("t", 3, batch([(b"k", b"v")]), acks=0), 9)


async def test_invalid_acks() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    response = await call(broker, produce_request("t", 0, batch([(b"k", b"v")]), acks=2), 9)
    assert response.responses[0].partition_responses[0].error_code == 21  # INVALID_REQUIRED_ACKS
    assert broker.cluster.get_partition("t", 0).log.log_end_offset == 0


async def test_unknown_topic_and_partition_are_not_created() -> None:
    """As in Kafka, Produce never auto-creates: Metadata does."""
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    request = ProduceRequest(
        acks=1,
        topic_data=[
            TopicProduceData("nope", [PartitionProduceData(0, batch([(b"k", b"v")]))]),
            TopicProduceData("t", [PartitionProduceData(5, batch([(b"k", b"v")]))]),
        ],
    )
    response = await call(broker, request, 9)
    codes = [
        (t.name, p.index, p.error_code, p.base_offset)
        for t in response.responses
        for p in t.partition_responses
    ]
    assert codes == [("nope", 0, 3, -1), ("t", 5, 3, -1)]
    assert "nope" not in broker.cluster.topics


async def test_crc_corruption_is_corrupt_message_and_nothing_is_appended() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    data = bytearray(batch([(b"k", b"value")]))
    data[-1] ^= 0xFF
    result = await produce(broker, "t", 0, bytes(data))
    assert (result.error_code, result.base_offset) == (2, -1)  # CORRUPT_MESSAGE
    assert broker.cluster.get_partition("t", 0).log.log_end_offset == 0


async def test_truncated_batch_is_corrupt_message() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    result = await produce(broker, "t", 0, batch([(b"k", b"value")])[:-3])
    assert result.error_code == 2


async def test_two_batches_in_one_partition_are_invalid_record() -> None:
    """Produce v3+ carries exactly one batch per partition (Kafka's rule)."""
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    result = await produce(broker, "t", 0, batch([(b"a", b"1")]) + batch([(b"b", b"2")]))
    assert result.error_code == 87  # INVALID_RECORD
    assert broker.cluster.get_partition("t", 0).log.log_end_offset == 0


async def test_magic_1_is_refused() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    legacy = LegacyBatchBuilder(magic=1)
    legacy.append(NOW, b"k", b"v")
    result = await produce(broker, "t", 0, legacy.build())
    assert result.error_code == 87


async def test_batch_over_max_message_bytes_is_message_too_large() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1, {"max.message.bytes": "200"})
    small = batch([(b"k", b"v" * 10)])
    big = batch([(b"k", b"v" * 300)])
    assert (await produce(broker, "t", 0, small)).error_code == 0
    result = await produce(broker, "t", 0, big)
    assert (result.error_code, result.base_offset) == (10, -1)  # MESSAGE_TOO_LARGE
    assert broker.cluster.get_partition("t", 0).log.log_end_offset == 1


async def test_keyless_records_on_compacted_topic() -> None:
    """INVALID_RECORD with the index of every keyless record, nothing appended."""
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("c", 1, {"cleanup.policy": "compact"})
    result = await produce(broker, "c", 0, batch([(b"k", b"1"), (None, b"2"), (None, b"3")]))
    assert result.error_code == 87
    assert [
        (e.batch_index, "without a key" in (e.batch_index_error_message or ""))
        for e in result.record_errors
    ] == [(1, True), (2, True)]
    assert result.error_message is not None
    assert broker.cluster.get_partition("c", 0).log.log_end_offset == 0
    assert (await produce(broker, "c", 0, batch([(b"k", b"1")]))).error_code == 0


async def test_timestamps_outside_before_and_after_limits() -> None:
    clock = FakeClock()
    broker = make_broker(clock)
    broker.cluster.create_topic(
        "t",
        1,
        {"message.timestamp.before.max.ms": "1000", "message.timestamp.after.max.ms": "500"},
    )
    ok = await produce(broker, "t", 0, batch([(b"k", b"v")], timestamp=NOW - 1000))
    assert ok.error_code == 0
    too_old = await produce(broker, "t", 0, batch([(b"k", b"v")], timestamp=NOW - 1001))
    too_new = await produce(broker, "t", 0, batch([(b"k", b"v")], timestamp=NOW + 501))
    assert (too_old.error_code, too_new.error_code) == (32, 32)  # INVALID_TIMESTAMP
    assert [e.batch_index for e in too_old.record_errors] == [0]
    assert broker.cluster.get_partition("t", 0).log.log_end_offset == 1


async def test_log_append_time_topic_stamps_the_broker_time() -> None:
    clock = FakeClock()
    broker = make_broker(clock)
    broker.cluster.create_topic("t", 1, {"message.timestamp.type": "LogAppendTime"})
    clock.advance(1234)
    result = await produce(broker, "t", 0, batch([(b"k", b"v")], timestamp=5))
    assert (result.error_code, result.log_append_time_ms) == (0, NOW + 1234)
    fetched = await call(broker, fetch_request("t", {0: 0}), 12)
    [record] = records_of(fetched.responses[0].partitions[0].records)
    assert record.timestamp == NOW + 1234


async def test_zstd_needs_produce_v7() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    data = batch([(b"k", b"v")], compression=4)
    assert (await produce(broker, "t", 0, data, version=6)).error_code == 76
    assert (await produce(broker, "t", 0, data, version=7)).error_code == 0


async def test_control_batch_from_client_is_refused() -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    data = bytearray(batch([(b"k", b"v")]))
    (attributes,) = struct.unpack_from(">h", data, 21)
    struct.pack_into(">h", data, 21, attributes | 0x20)
    from kafkette.protocol.records.batch_header import batch_crc

    struct.pack_into(">I", data, 17, batch_crc(data, 0, len(data)))
    assert (await produce(broker, "t", 0, bytes(data))).error_code == 87


@pytest.mark.parametrize("version", [3, 4, 5, 7, 8, 10, 11])
async def test_every_served_version_answers(version: int) -> None:
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1)
    assert (await produce(broker, "t", 0, batch([(b"a", b"1")]), version=version)).base_offset == 0
    result = await produce(broker, "t", 0, batch([(b"b", b"2")]), version=version)
    assert (result.error_code, result.base_offset) == (0, 1)


async def test_produce_v3_is_the_oldest_served() -> None:
    broker = make_broker(FakeClock())
    assert broker.supported_versions()[0][0] == 3
    assert broker.supported_versions()[1][0] == 4


@pytest.mark.parametrize(
    ("topic_codec", "sent", "stored"),
    [("gzip", 0, 1), ("uncompressed", 4, 0), ("lz4", 2, 3), ("producer", 2, 2)],
)
async def test_topic_compression_type_recompresses(
    topic_codec: str, sent: int, stored: int
) -> None:
    """A topic's compression.type other than ``producer`` re-encodes batches in its codec,
    keeping records, timestamps and producer fields."""
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("t", 1, {"compression.type": topic_codec})
    data = batch(
        [(b"a", b"1" * 100), (None, b"2")],
        compression=sent,
        producer_id=4,
        producer_epoch=1,
        base_sequence=0,
        headers=[("h", b"x")],
    )
    assert (await produce(broker, "t", 0, data)).error_code == 0
    fetched = await call(broker, fetch_request("t", {0: 0}), 12)
    raw = bytes(fetched.responses[0].partitions[0].records)
    header = parse_header(raw)
    assert header.compression == stored
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4, 1, 0)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records_of(raw)] == [
        (0, NOW, b"a", b"1" * 100, (("h", b"x"),)),
        (1, NOW, None, b"2", (("h", b"x"),)),
    ]
    retry = await produce(broker, "t", 0, data)  # still recognised as a duplicate
    assert (retry.error_code, retry.base_offset) == (0, 0)


async def test_clients_cannot_append_to_internal_topics() -> None:
    """As Kafka: only the coordinators (and Kafka's own admin tools) write __consumer_offsets."""
    broker = make_broker(FakeClock())
    broker.cluster.create_topic("__consumer_offsets", 1)
    result = await produce(broker, "__consumer_offsets", 0, batch([(b"k", b"v")]))
    assert (result.error_code, result.base_offset) == (17, -1)  # INVALID_TOPIC_EXCEPTION
    assert result.error_message == "Cannot append to internal topic __consumer_offsets"
    assert broker.cluster.get_partition("__consumer_offsets", 0).log.log_end_offset == 0
