"""GroupMember.poll_steps without a broker: which listener calls and operations a poll
makes in each state (the decisions of Java's onJoinPrepare / onJoinComplete), and how
work that outlives a poll's deadline is taken up by the next poll."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from kafkette.client.client import KafkaClient
from kafkette.client.config import ConsumerConfig
from kafkette.consumer.core import ConsumerCore
from kafkette.consumer.group.coordinator import COMMIT_JOB, GroupMember, Invoke, Step
from kafkette.consumer.group.member_base import Job
from kafkette.consumer.group.membership import MemberState
from kafkette.consumer.subscription import SubscriptionState
from kafkette.errors import IllegalStateError
from kafkette.structs import TopicPartition

pytestmark = pytest.mark.anyio

A0, A1, A2 = (TopicPartition("a", p) for p in range(3))


class Listener:
    def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None: ...
    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None: ...
    def on_partitions_lost(self, partitions: set[TopicPartition]) -> None: ...


def member(strategy: str, **settings: Any) -> tuple[GroupMember, SubscriptionState]:
    config = ConsumerConfig.from_user(
        bootstrap_servers="memory://unused",
        group_id="g",
        partition_assignment_strategy=[strategy],
        **settings,
    )
    state = SubscriptionState()
    client = KafkaClient(config, clock=lambda: 1_000.0)
    client.metadata.update(client.metadata.snapshot, 1_000.0)  # fresh: no refresh step
    m = GroupMember(client, config, state, lambda tps: state.assign(tps) and None)
    m.subscribe(["a"], None, Listener())
    return m, state


def stable(m: GroupMember, state: SubscriptionState, owned: list[TopicPartition]) -> None:
    state.assign(owned)
    membership = m.membership
    membership.generation_id, membership.member_id = 3, "m-1"
    membership.state = MemberState.STABLE
    membership.rejoin_needed = False


def describe(steps: Iterator[Step]) -> list[tuple[str, Any]]:
    """The steps as (name, partitions argument or None); nothing is run. A step that
    starts (or waits for) background work is named after that work."""
    out: list[tuple[str, Any]] = []
    for step in steps:
        if isinstance(step, Invoke):
            out.append((step.func.__name__, sorted(step.args[0])))
            continue
        func = step.func
        name = getattr(func, "func", func).__name__
        args = getattr(func, "args", ())
        if name == "_run_job":
            name, args = args[1].__name__, ()
        out.append((name, sorted(args[0]) if args and isinstance(args[0], list) else None))
    return out


def job_ended(m: GroupMember, key: str) -> None:
    """As if background work ``key`` had been started by a poll and had ended since."""
    ended = anyio.Event()
    ended.set()
    m._jobs[key] = Job(ended)


def revoking(state: SubscriptionState) -> list[TopicPartition]:
    return sorted(tp for tp in state.assigned() if state.state(tp).revoking)


async def test_stable_member_polls_without_group_work() -> None:
    m, state = member("range", enable_auto_commit=False)
    stable(m, state, [A0])
    assert describe(m.poll_steps(2_000)) == []


async def test_eager_rejoin_commits_then_revokes_everything_then_joins() -> None:
    m, state = member("range")
    stable(m, state, [A0, A1])
    m.request_rejoin("test")
    # The commit runs in the background; a poll whose deadline comes first goes no
    # further, and the partitions hand out no more records meanwhile.
    assert describe(m.poll_steps(2_000)) == [("_commit_quietly", None)]
    assert revoking(state) == [A0, A1]
    assert (m.state, m.membership.revoked_for_join) == (MemberState.STABLE, False)
    assert describe(m.poll_steps(2_000)) == [("_commit_quietly", None)]
    # A later poll finds it ended: revoke, then join.
    job_ended(m, COMMIT_JOB)
    assert describe(m.poll_steps(2_000)) == [
        ("_commit_quietly", None),
        ("on_partitions_revoked", [A0, A1]),
        ("_apply", []),
        ("_request_join", None),
        ("_await_join", None),
    ]
    assert m._jobs == {}


async def test_cooperative_rejoin_keeps_the_partitions() -> None:
    m, state = member("cooperative-sticky", enable_auto_commit=False)
    stable(m, state, [A0, A1])
    m.request_rejoin("test")
    assert describe(m.poll_steps(2_000)) == [("_request_join", None), ("_await_join", None)]


async def test_member_without_generation_reports_its_partitions_lost() -> None:
    m, state = member("range")
    stable(m, state, [A0, A1])
    m.generation_id = -1
    m.request_rejoin("fenced")
    assert describe(m.poll_steps(2_000)) == [
        ("on_partitions_lost", [A0, A1]),
        ("_apply", []),
        ("_request_join", None),
        ("_await_join", None),
    ]


async def test_cooperative_join_result_revokes_moved_partitions_and_rejoins() -> None:
    m, state = member("cooperative-sticky", enable_auto_commit=False)
    stable(m, state, [A0, A1])
    m.membership.state = MemberState.ASSIGNED  # a join finished; poll takes its result
    m.membership.assignment = (A1, A2)
    assert describe(m.poll_steps(2_000)) == [
        ("on_partitions_revoked", [A0]),
        ("_apply", [A1, A2]),
        ("on_partitions_assigned", [A2]),
    ]
    assert m.rejoin_needed


async def test_eager_join_result_assigns_everything() -> None:
    m, state = member("range", enable_auto_commit=False)
    stable(m, state, [])
    m.membership.state = MemberState.ASSIGNED
    m.membership.assignment = (A0, A2)
    assert describe(m.poll_steps(2_000)) == [
        ("_apply", [A0, A2]),
        ("on_partitions_assigned", [A0, A2]),
    ]
    assert not m.rejoin_needed


async def test_background_work_outlives_the_poll_that_started_it() -> None:
    """A job step waits for its work up to the poll's deadline only; the work goes on,
    a later step waits for the same run (not a new one), and its error is raised once."""
    m, _ = member("range")
    gate = anyio.Event()
    runs: list[str] = []

    async def work() -> None:
        runs.append("started")
        await gate.wait()
        raise ValueError("the work failed")

    async with anyio.create_task_group() as tg:
        m._task_group = tg
        now = m.client.clock()
        await m.job("w", work, now).func()  # the deadline has come: returns at once
        assert not m.job_ended("w")
        await m.job("w", work, now).func()
        assert runs == ["started"] and not m.job_ended("w")
        gate.set()
        await m.job("w", work, now + 60_000).func()  # returns when the work ends
        with pytest.raises(ValueError, match="the work failed"):
            m.job_ended("w")
        assert not m.job_ended("w") and runs == ["started"]


async def test_auto_commit_when_due() -> None:
    m, state = member("range", auto_commit_interval_ms=500)
    stable(m, state, [A0])
    assert describe(m.poll_steps(2_000)) == []
    m.timers.next_auto_commit_ms = 1_000
    assert describe(m.poll_steps(2_000)) == [("_start_auto_commit", None)]
    assert describe(m.poll_steps(2_000)) == []


async def test_subscribe_reads_patterns_and_names() -> None:
    config = ConsumerConfig.from_user(bootstrap_servers="memory://unused", group_id="g")
    core = ConsumerCore(config)
    core.start_task = lambda func: None
    core.subscribe("^a.*")
    group = core.member()
    assert group.pattern == re.compile("^a.*")
    core.subscribe(re.compile("b+"))
    assert group.pattern == re.compile("b+")
    core.subscribe("plain")
    assert (group.pattern, group.topics) == (None, {"plain"})
    core.subscribe(["x", "y"])
    assert (group.pattern, group.topics) == (None, {"x", "y"})
    with pytest.raises(ValueError):
        core.subscribe([])
    with pytest.raises(IllegalStateError):
        core.assign([A0])
    await core.close()
