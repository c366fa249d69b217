"""Java's ``rebalance-latency-avg/-max/-total`` (KIP-714's
``consumer.coordinator.rebalance.latency.*``): each rebalance's time, from its first join
until the member holds its assignment, under a test clock (classic) and against the
in-process broker (KIP-848)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from kafkette import AsyncConsumer
from kafkette.client.client import KafkaClient
from kafkette.client.config import ConsumerConfig
from kafkette.consumer.assignors.base import Assignment
from kafkette.consumer.assignors.protocol import encode_assignment
from kafkette.consumer.group.coordinator import GroupMember
from kafkette.consumer.metrics import MetricsRecorder
from kafkette.consumer.subscription import SubscriptionState
from kafkette.protocol.messages import JoinGroupResponse, SyncGroupResponse
from kafkette.structs import TopicPartition
from kafkette.testing import MemoryCluster
from tests.consumer.group.test_member_steps import Listener

pytestmark = pytest.mark.anyio

A0 = TopicPartition("a", 0)


def member(now: list[float]) -> tuple[GroupMember, MetricsRecorder]:
    config = ConsumerConfig.from_user(
        bootstrap_servers="memory://unused", group_id="g", partition_assignment_strategy=["range"]
    )
    state = SubscriptionState()
    client = KafkaClient(config, clock=lambda: now[0])
    client.metadata.update(client.metadata.snapshot, now[0])  # fresh: no refresh step
    m = GroupMember(client, config, state, lambda tps: state.assign(tps) and None)
    m.subscribe(["a"], None, Listener())
    recorder = MetricsRecorder()
    m.rebalance_latency = recorder.rebalance_done
    return m, recorder


def answers(now: list[float], *steps: tuple[float, Any]) -> Callable[..., Any]:
    """A coordinator that answers each request after the step's milliseconds."""
    queue = list(steps)

    async def send(build: Callable[[int], Any]) -> Any:
        elapsed, response = queue.pop(0)
        now[0] += elapsed
        return response

    return send


def start_join(m: GroupMember) -> None:
    """Run a poll's steps (without their work) until it asked for the join."""
    steps = m.poll_steps(m.client.clock() + 5_000)
    while not m.membership.join_requested:
        next(steps)


def join_answer(generation: int) -> JoinGroupResponse:
    return JoinGroupResponse(
        generation_id=generation,
        protocol_name="range",
        leader="other",  # not the leader: no assignment to compute
        member_id="m-1",
    )


def sync_answer() -> SyncGroupResponse:
    return SyncGroupResponse(assignment=encode_assignment(Assignment(partitions=(A0,))))


async def test_a_classic_rebalance_is_timed_from_its_join_to_the_sync_answer() -> None:
    now = [1_000.0]
    m, recorder = member(now)
    start_join(m)
    m._send = answers(now, (25, join_answer(1)), (15, sync_answer()))  # type: ignore[method-assign]
    assert await m._join_once()
    assert (recorder.rebalance_count, recorder.rebalance_latency_total_ms) == (1, 40.0)

    # a second rebalance whose first JoinGroup is answered REBALANCE_IN_PROGRESS: the
    # join again counts in it (as in Java, a rebalance ends at its successful sync)
    assert m.membership.take_join_result() is None  # the poll applied the assignment
    now[0] += 500
    m.membership.request_rejoin("a new member")
    m.membership.revoked_for_join = True  # (the revocation before it is not what is timed)
    start_join(m)
    m._send = answers(  # type: ignore[method-assign]
        now,
        (10, JoinGroupResponse(error_code=27, member_id="m-1")),
        (20, join_answer(2)),
        (15, sync_answer()),
    )
    assert not await m._join_once()  # join again at once
    assert await m._join_once()
    snapshot = recorder.snapshot({})
    assert snapshot.rebalance_latency_total_ms == 40.0 + 45.0
    assert snapshot.rebalance_latency_max_ms == 45.0
    assert snapshot.rebalance_latency_avg_ms == 42.5


async def test_a_kip_848_member_times_its_join_to_its_reconciled_assignment() -> None:
    with MemoryCluster() as cluster:
        from kafkette import AsyncAdminClient, NewTopic

        async with AsyncAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic("a", 2, 1)])
        async with AsyncConsumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=f"g-{uuid.uuid4().hex[:6]}",
            group_protocol="consumer",
        ) as consumer:
            consumer.subscribe(["a"])
            with anyio.fail_after(20):
                while not consumer.assignment():
                    await consumer.poll(timeout_ms=50)
            final = consumer.metrics()
    assert final.rebalance_latency_total_ms > 0
    assert final.rebalance_latency_avg_ms == final.rebalance_latency_total_ms  # one rebalance
    assert final.rebalance_latency_max_ms == final.rebalance_latency_total_ms
