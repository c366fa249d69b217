"""Where the consumer suite runs: memory://, ``kafkette serve`` over TCP, Tansu over TCP.

A :class:`Target` has a bootstrap string and a small synchronous admin made
of our own low-level client (KafkaClient + raw requests, in a background
loop): create a topic, produce prebuilt batches (so offsets, timestamps and
headers are exactly known), delete records. The same requests go to every
target, so memory:// gets its data the way the TCP brokers do.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.client.sync_bridge import BackgroundLoop
from kafkette.errors import raise_for_code
from kafkette.protocol.messages import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkette.protocol.messages.create_topics_request import CreatableTopic
from kafkette.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsTopic,
)
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.records import Header, RecordBatchBuilder
from kafkette.structs import TopicPartition

Row = tuple[int, bytes | None, bytes | None, Sequence[Header]]
"""timestamp, key, value, headers"""


async def _create(client: KafkaClient, name: str, partitions: int) -> None:
    node = await client.any_node()
    response = await client.send(
        node,
        CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)],
            timeout_ms=10_000,
        ),
    )
    assert isinstance(response, CreateTopicsResponse)
    raise_for_code(response.topics[0].error_code, name)


async def _wait_for_leaders(client: KafkaClient, name: str, partitions: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        snapshot = await client.refresh_metadata([name])
        if snapshot.partition_count(name) == partitions and all(
            snapshot.leader_for(name, p) is not None for p in range(partitions)
        ):
            return
        assert time.monotonic() < deadline, f"topic {name} has no leaders"
        client.metadata.request_update()
        import anyio

        await anyio.sleep(0.05)


async def _produce(client: KafkaClient, tp: TopicPartition, batch: bytes) -> int:
    leader = await client.leader(tp.topic, tp.partition)
    response = await client.send(
        leader,
        ProduceRequest(
            acks=-1,
            timeout_ms=10_000,
            topic_data=[
                TopicProduceData(
                    name=tp.topic,
                    partition_data=[PartitionProduceData(index=tp.partition, records=batch)],
                )
            ],
        ),
    )
    assert isinstance(response, ProduceResponse)
    answer = response.responses[0].partition_responses[0]
    raise_for_code(answer.error_code, f"producing to {tp}: {answer.error_message}")
    return answer.base_offset


async def _delete_records(client: KafkaClient, tp: TopicPartition, offset: int) -> int:
    leader = await client.leader(tp.topic, tp.partition)
    response = await client.send(
        leader,
        DeleteRecordsRequest(
            topics=[
                DeleteRecordsTopic(
                    name=tp.topic,
                    partitions=[
                        DeleteRecordsPartition(partition_index=tp.partition, offset=offset)
                    ],
                )
            ],
            timeout_ms=10_000,
        ),
    )
    assert isinstance(response, DeleteRecordsResponse)
    answer = response.topics[0].partitions[0]
    raise_for_code(answer.error_code, f"deleting records of {tp}")
    return answer.low_watermark


def build_batch(rows: Sequence[Row], compression: int = 0) -> bytes:
    builder = RecordBatchBuilder(compression=compression)
    for timestamp, key, value, headers in rows:
        builder.append(timestamp, key, value, headers)
    return builder.build()


class Target:
    """One broker the suite runs against, with a low-level admin for test data."""

    def __init__(self, name: str, bootstrap: str, tansu: Any = None) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self._tansu = tansu
        self._loop = BackgroundLoop(f"consumer-tests-{name}")
        self._client: KafkaClient = self._loop.call(self._make_client)

    async def _make_client(self) -> KafkaClient:
        return KafkaClient(AdminConfig.from_user(bootstrap_servers=self.bootstrap))

    def create_topic(self, name: str, partitions: int = 1) -> None:
        if self._tansu is not None:
            self._tansu.create_topic(name, partitions)
        else:
            self._loop.call(_create, self._client, name, partitions)
        self._loop.call(_wait_for_leaders, self._client, name, partitions)

    def produce_batch(self, tp: TopicPartition, batch: bytes) -> int:
        """Append a prebuilt batch; returns its base offset."""
        return self._loop.call(_produce, self._client, tp, batch)

    def produce(self, tp: TopicPartition, rows: Sequence[Row], compression: int = 0) -> int:
        return self.produce_batch(tp, build_batch(rows, compression))

    def produce_values(self, tp: TopicPartition, count: int, *, start: int = 0) -> int:
        """``count`` records ``v{i}`` (key ``k{i}``, timestamp 1000+i) in one batch."""
        rows = [(1000 + i, b"k%d" % i, b"v%d" % i, ()) for i in range(start, start + count)]
        return self.produce(tp, rows)

    def delete_records(self, tp: TopicPartition, before: int) -> int:
        return self._loop.call(_delete_records, self._client, tp, before)

    def close(self) -> None:
        try:
            self._loop.call(self._client.close)
        finally:
            self._loop.close()
