"""Helpers for the group tests: a recording listener, polling several members at once."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import anyio

from kafkette import AsyncConsumer, Consumer, ConsumerRecord, TopicPartition
from kafkette.consumer.group import ConsumerRebalanceListener

DEADLINE_S = 30.0
Event = tuple[str, str, list[int]]


class Recorder(ConsumerRebalanceListener):
    """Logs ``(member, kind, sorted partition numbers)`` for each listener call."""

    def __init__(self, name: str, log: list[Event]) -> None:
        self.name = name
        self.log = log

    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.log.append((self.name, "revoked", sorted(tp.partition for tp in partitions)))

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.log.append((self.name, "assigned", sorted(tp.partition for tp in partitions)))

    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.log.append((self.name, "lost", sorted(tp.partition for tp in partitions)))


def numbers(partitions: set[TopicPartition]) -> list[int]:
    return sorted(tp.partition for tp in partitions)


async def apoll_until(
    consumers: Sequence[AsyncConsumer],
    done: Callable[[], bool],
    records: list[ConsumerRecord] | None = None,
) -> None:
    """Poll every consumer concurrently, round after round, until ``done()``."""
    deadline = time.monotonic() + DEADLINE_S

    async def poll(consumer: AsyncConsumer) -> None:
        got = await consumer.poll(timeout_ms=100)
        if records is not None:
            for batch in got.values():
                records.extend(batch)

    while not done():
        assert time.monotonic() < deadline, "the group did not settle in time"
        async with anyio.create_task_group() as tg:
            for consumer in consumers:
                tg.start_soon(poll, consumer)


def poll_until(
    consumers: Sequence[Consumer],
    done: Callable[[], bool],
    records: list[ConsumerRecord] | None = None,
) -> None:
    """Poll the consumers in turn (short polls) until ``done()``."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        assert time.monotonic() < deadline, "the group did not settle in time"
        for consumer in consumers:
            got = consumer.poll(timeout_ms=50)
            if records is not None:
                for batch in got.values():
                    records.extend(batch)
