"""Helpers for the in-process data-path tests: a broker with a fake clock, requests
round-tripped through the wire codec, batches built with the protocol layer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from kafkette.protocol.headers import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kafkette.protocol.messages import FetchRequest, ProduceRequest
from kafkette.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.records import Record, RecordBatchBuilder, iter_batches
from kafkette.protocol.schema import Request, Response
from kafkette.server import Broker, BrokerConfig, RequestContext

NOW = 1_700_000_000_000

R = TypeVar("R", bound=Response)


class FakeClock:
    """Milliseconds that move only when told."""

    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return float(self.now)

    def advance(self, ms: int) -> None:
        self.now += ms


def make_broker(clock: FakeClock, data_dir: str | None = None, **settings: Any) -> Broker:
    config = BrokerConfig(data_dir=data_dir, **settings)
    return Broker(config, clock=clock)


async def call(broker: Broker, request: Request, version: int) -> Any:
    """Send ``request`` at ``version`` through the codec, as the listener would, and
    decode the response the same way (None when there is none)."""
    frame = encode_request(request, version, 7, "tests")
    header, decoded = decode_request(memoryview(bytes(frame)))
    response = await broker.handle(RequestContext(header), decoded)
    if response is None:
        return None
    raw = encode_response(response, version, 7)
    correlation, parsed = decode_response(bytes(raw), request.API_KEY, version)
    assert correlation == 7
    return parsed


def batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    timestamp: int = NOW,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> bytes:
    builder = RecordBatchBuilder(
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
    )
    for key, value in records:
        builder.append(timestamp, key, value, headers)
    return builder.build()


def produce_request(
    topic: str,
    partition: int,
    records: bytes | None,
    *,
    acks: int = -1,
    transactional_id: str | None = None,
) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout_ms=30_000,
        topic_data=[TopicProduceData(topic, [PartitionProduceData(partition, records)])],
    )


async def produce(
    broker: Broker,
    topic: str,
    partition: int,
    records: bytes,
    *,
    version: int = 9,
    transactional_id: str | None = None,
) -> Any:
    """The partition's response to one Produce request."""
    request = produce_request(topic, partition, records, transactional_id=transactional_id)
    response = await call(broker, request, version)
    return response.responses[0].partition_responses[0]


def fetch_request(
    topic: str,
    offsets: dict[int, int],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 << 20,
    partition_max_bytes: int = 1 << 20,
    isolation_level: int = 0,
) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(
                        partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes
                    )
                    for p, o in offsets.items()
                ],
            )
        ],
    )


def records_of(data: bytes | bytearray | memoryview | None) -> list[Record]:
    """Every record of a fetch response's partition records."""
    if not data:
        return []
    return [record for b in iter_batches(bytes(data)) for record in b]
