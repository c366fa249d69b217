"""Committed offsets: explicit and automatic commits, resuming after a restart."""

from __future__ import annotations

from typing import Any

import pytest

from kafkette import AsyncConsumer, Consumer, ConsumerRecord, TopicPartition
from kafkette.consumer.group import CommitFailedError, OffsetAndMetadata
from kafkette.errors import IllegalStateError
from tests.consumer.group.helpers import apoll_until, poll_until
from tests.consumer.group.test_membership import settings
from tests.consumer.targets import Target


def values(records: list[ConsumerRecord]) -> list[tuple[int, int, bytes | None]]:
    return sorted((r.partition, r.offset, r.value) for r in records)


def fill(target: Target, topic: str, partitions: int, count: int) -> None:
    target.create_topic(topic, partitions)
    for p in range(partitions):
        target.produce_values(TopicPartition(topic, p), count)


@pytest.mark.anyio
async def test_commit_then_restart_resumes_at_committed_offsets_async(
    group_target: Target, topic: str, group: str
) -> None:
    fill(group_target, topic, 2, 5)
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    config = settings(group_target, group, enable_auto_commit=False)
    async with AsyncConsumer(config) as consumer:
        consumer.subscribe([topic])
        got: list[ConsumerRecord] = []
        await apoll_until([consumer], lambda: len(got) >= 10, got)
        assert values(got) == [(p, i, b"v%d" % i) for p in (0, 1) for i in range(5)]
        await consumer.commit({t0: 3, t1: OffsetAndMetadata(1, "half")})
        assert await consumer.committed([t0, t1]) == {
            t0: OffsetAndMetadata(3, ""),
            t1: OffsetAndMetadata(1, "half"),
        }
    async with AsyncConsumer(config) as consumer:
        consumer.subscribe([topic])
        got = []
        await apoll_until([consumer], lambda: len(got) >= 6, got)
        assert values(got) == [(0, 3, b"v3"), (0, 4, b"v4")] + [
            (1, i, b"v%d" % i) for i in range(1, 5)
        ]
        await consumer.commit()
        assert await consumer.committed([t0, t1]) == {
            t0: OffsetAndMetadata(5),
            t1: OffsetAndMetadata(5),
        }


def test_auto_commit_on_close_sync(group_target: Target, topic: str, group: str) -> None:
    """With enable.auto.commit, close() commits what poll handed out."""
    fill(group_target, topic, 1, 4)
    tp = TopicPartition(topic, 0)
    config = settings(group_target, group, auto_commit_interval_ms=600_000)
    with Consumer(config) as consumer:
        consumer.subscribe([topic])
        got: list[ConsumerRecord] = []
        poll_until([consumer], lambda: len(got) >= 4, got)
        assert consumer.committed([tp]) == {tp: None}
    with Consumer(config) as consumer:
        assert consumer.committed([tp]) == {tp: OffsetAndMetadata(4)}
        group_target.produce_values(tp, 1, start=4)
        consumer.subscribe([topic])
        got = []
        poll_until([consumer], lambda: len(got) >= 1, got)
        assert values(got) == [(0, 4, b"v4")]


def test_commit_async_callback_runs_in_poll_sync(
    group_target: Target, topic: str, group: str
) -> None:
    fill(group_target, topic, 1, 2)
    tp = TopicPartition(topic, 0)
    config = settings(group_target, group, enable_auto_commit=False)
    results: list[Any] = []
    with Consumer(config) as consumer:
        consumer.subscribe([topic])
        got: list[ConsumerRecord] = []
        poll_until([consumer], lambda: len(got) >= 2, got)
        consumer.commit_async(callback=lambda offsets, error: results.append((offsets, error)))
        poll_until([consumer], lambda: bool(results))
        assert results == [({tp: OffsetAndMetadata(2)}, None)]
        assert consumer.committed([tp]) == {tp: OffsetAndMetadata(2)}


@pytest.mark.anyio
async def test_assign_and_subscribe_exclude_each_other(group_target: Target, group: str) -> None:
    config = settings(group_target, group)
    async with AsyncConsumer(config) as consumer:
        consumer.assign([TopicPartition("x", 0)])
        with pytest.raises(IllegalStateError):
            consumer.subscribe(["x"])
        await consumer.unsubscribe()
        assert consumer.assignment() == set()
        consumer.subscribe(["x"])
        with pytest.raises(IllegalStateError):
            consumer.assign([TopicPartition("x", 0)])


@pytest.mark.anyio
async def test_commit_with_a_stale_generation_fails(
    group_target: Target, topic: str, group: str
) -> None:
    """A commit carrying a generation the group left behind is CommitFailedError."""
    fill(group_target, topic, 1, 1)
    config = settings(group_target, group, enable_auto_commit=False)
    async with AsyncConsumer(config) as consumer:
        consumer.subscribe([topic])
        await apoll_until([consumer], lambda: bool(consumer.assignment()))
        member = consumer._c.member()
        member.generation_id += 5
        with pytest.raises(CommitFailedError):
            await consumer.commit({TopicPartition(topic, 0): 1})
