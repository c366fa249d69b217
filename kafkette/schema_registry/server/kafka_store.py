""":class:`KafkaStore`: the registry's records in a broker's compacted ``_schemas`` topic.

The registry reaches the broker as any user does, through kafkette's own async
clients (``memory://NAME`` for the in-process fake, a listener's address for
``kafkette serve``, or any Kafka). The topic has one partition, so every
registry reads the records in one order; it is compacted, so the last record
of each key is what a restart reads. Reading "to the end" means to the high
watermark asked for just before; an append waits until the consumer has read
past its own records, as Confluent's KafkaStore waits for its reader thread.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio

from kafkette.admin import AsyncAdminClient, NewTopic
from kafkette.admin.types import OffsetSpec
from kafkette.consumer import AsyncConsumer
from kafkette.errors import TopicAlreadyExistsError
from kafkette.producer import AsyncProducer
from kafkette.schema_registry.server.state import RegistryState
from kafkette.structs import TopicPartition

TOPIC = "_schemas"
TIMEOUT_S = 30.0
"""How long reading to the end or an append may take (Confluent's kafkastore.timeout.ms
is 500 ms, against a local log; a broker over the network is given more)."""


class StoreTimeout(TimeoutError):
    """The topic could not be read to its end, or written, in time."""


class KafkaStore:
    """The records of one partition of ``topic``, read and appended through the clients."""

    def __init__(
        self,
        admin: AsyncAdminClient,
        producer: AsyncProducer,
        consumer: AsyncConsumer,
        topic: str,
    ) -> None:
        self.admin = admin
        self.producer = producer
        self.consumer = consumer
        self.partition = TopicPartition(topic, 0)
        self.position = 0
        self._reading = anyio.Lock()  # one poller at a time: reads catch up concurrently

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        bootstrap_servers: str,
        topic: str = TOPIC,
        client_config: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[KafkaStore]:
        """Create the topic if missing (one partition, compacted) and connect to it;
        ``client_config``: more settings of the clients (security, credentials)."""
        settings = {**(client_config or {}), "bootstrap.servers": bootstrap_servers}
        admin = AsyncAdminClient(settings)
        producer = AsyncProducer(settings, acks="all", linger_ms=0)
        consumer = AsyncConsumer(settings, enable_auto_commit=False, auto_offset_reset="earliest")
        async with admin, producer, consumer:
            configs = {"cleanup.policy": "compact"}
            results = await admin.create_topics([NewTopic(topic, 1, -1, configs)])
            error = results[topic].error
            if error is not None and not isinstance(error, TopicAlreadyExistsError):
                raise error
            store = cls(admin, producer, consumer, topic)
            consumer.assign([store.partition])
            consumer.seek_to_beginning(store.partition)
            yield store

    async def catch_up(self, state: RegistryState) -> None:
        # asked on the admin's connection: the consumer's may be parked on a long-poll
        # fetch, and a broker answers a connection's requests in order
        specs = {self.partition: OffsetSpec.LATEST}
        answer = await self.admin.list_offsets(specs, timeout=TIMEOUT_S)
        await self._read_until(state, answer[self.partition].result().offset)

    async def append(
        self, state: RegistryState, records: Sequence[tuple[bytes, bytes | None]]
    ) -> None:
        futures = [
            await self.producer.send(self.partition.topic, value, key, partition=0)
            for key, value in records
        ]
        last = -1
        with anyio.move_on_after(TIMEOUT_S):
            for future in futures:
                last = max(last, (await future).offset)
        if last < 0 and futures:
            raise StoreTimeout("the records were not acknowledged in time")
        await self._read_until(state, last + 1)

    async def _read_until(self, state: RegistryState, end: int) -> None:
        with anyio.move_on_after(TIMEOUT_S):
            async with self._reading:
                await self._poll_until(state, end)
            return
        raise StoreTimeout(f"the {self.partition.topic} topic was not read to {end} in time")

    async def _poll_until(self, state: RegistryState, end: int) -> None:
        while self.position < end:
            batches = await self.consumer.poll(timeout=0.5)
            for record in batches.get(self.partition, []):
                state.apply(record.key or b"", record.value)
                self.position = record.offset + 1
            if self.position < end:
                # compaction and control records leave gaps: the consumer knows its place
                self.position = max(self.position, await self.consumer.position(self.partition))
