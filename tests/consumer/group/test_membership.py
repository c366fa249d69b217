"""Consumers in a group: the split, rebalances and the listener, leaving, commits.

Async tests run on asyncio and trio; each scenario also has a sync variant.
"""

from __future__ import annotations

from typing import Any

import pytest

from kafkette import AsyncConsumer, Consumer, TopicPartition
from tests.consumer.group.helpers import Event, Recorder, apoll_until, numbers, poll_until
from tests.consumer.targets import Target

FAST = {
    "session_timeout_ms": 6_000,
    "heartbeat_interval_ms": 200,
    "max_poll_interval_ms": 8_000,
    "fetch_max_wait_ms": 100,
    "auto_offset_reset": "earliest",
}


def settings(target: Target, group: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap_servers": target.bootstrap,
        "group_id": group,
        "partition_assignment_strategy": ["range"],
        **FAST,
        **extra,
    }


def split_in_two(a: set[TopicPartition], b: set[TopicPartition]) -> bool:
    return {tuple(numbers(a)), tuple(numbers(b))} == {(0, 1), (2, 3)}


@pytest.mark.anyio
async def test_range_split_third_member_and_leaving_eager_async(
    group_target: Target, topic: str, group: str
) -> None:
    """2 members split 4 partitions 2/2; a 3rd makes it 2/1/1 (eager: everyone revokes
    everything first); when it closes its partitions go back, and it revokes on close."""
    group_target.create_topic(topic, 4)
    log: list[Event] = []
    config = settings(group_target, group)
    async with AsyncConsumer(config) as a, AsyncConsumer(config) as b:
        a.subscribe([topic], listener=Recorder("a", log))
        b.subscribe([topic], listener=Recorder("b", log))
        assert a.subscription() == {topic}
        await apoll_until([a, b], lambda: split_in_two(a.assignment(), b.assignment()))
        assert a.group_metadata().generation_id == b.group_metadata().generation_id
        first = {"a": numbers(a.assignment()), "b": numbers(b.assignment())}
        assert [e for e in log if e[1] == "assigned"][-2:] in (
            [("a", "assigned", first["a"]), ("b", "assigned", first["b"])],
            [("b", "assigned", first["b"]), ("a", "assigned", first["a"])],
        )
        log.clear()

        async with AsyncConsumer(config) as c:
            c.subscribe([topic], listener=Recorder("c", log))
            await apoll_until(
                [a, b, c],
                lambda: sorted(len(x.assignment()) for x in (a, b, c)) == [1, 1, 2],
            )
            parts = {n: numbers(x.assignment()) for n, x in (("a", a), ("b", b), ("c", c))}
            assert sorted(parts.values()) == [[0, 1], [2], [3]]
            # Eager: a and b revoked all they had, then each got its new share.
            assert sorted(e for e in log if e[0] in "ab") == sorted(
                [
                    ("a", "revoked", first["a"]),
                    ("a", "assigned", parts["a"]),
                    ("b", "revoked", first["b"]),
                    ("b", "assigned", parts["b"]),
                ]
            )
            assert [e for e in log if e[0] == "c"] == [("c", "assigned", parts["c"])]
            log.clear()
        assert log == [("c", "revoked", parts["c"])]
        await apoll_until([a, b], lambda: split_in_two(a.assignment(), b.assignment()))


def test_range_split_third_member_and_leaving_eager_sync(
    every_group_target: Target, topic: str, group: str
) -> None:
    every_group_target.create_topic(topic, 4)
    log: list[Event] = []
    config = settings(every_group_target, group)
    with Consumer(config) as a, Consumer(config) as b:
        a.subscribe([topic], listener=Recorder("a", log))
        b.subscribe([topic], listener=Recorder("b", log))
        poll_until([a, b], lambda: split_in_two(a.assignment(), b.assignment()))
        first = {"a": numbers(a.assignment()), "b": numbers(b.assignment())}
        log.clear()
        with Consumer(config) as c:
            c.subscribe([topic], listener=Recorder("c", log))
            poll_until(
                [a, b, c],
                lambda: sorted(len(x.assignment()) for x in (a, b, c)) == [1, 1, 2],
            )
            parts = {n: numbers(x.assignment()) for n, x in (("a", a), ("b", b), ("c", c))}
            assert sorted(parts.values()) == [[0, 1], [2], [3]]
            assert sorted(e for e in log if e[0] in "ab") == sorted(
                [
                    ("a", "revoked", first["a"]),
                    ("a", "assigned", parts["a"]),
                    ("b", "revoked", first["b"]),
                    ("b", "assigned", parts["b"]),
                ]
            )
            log.clear()
        assert log == [("c", "revoked", parts["c"])]
        poll_until([a, b], lambda: split_in_two(a.assignment(), b.assignment()))
