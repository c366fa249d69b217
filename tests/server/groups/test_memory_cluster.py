"""kafkette.testing: a memory:// cluster on a ManualClock, reached by a KafkaClient; the
group timers run in the cluster's loop, so moving the clock expires a session."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.client.inprocess import get_cluster
from kafkette.protocol.messages import (
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    SyncGroupRequest,
)
from kafkette.protocol.messages.join_group_request import JoinGroupRequestProtocol
from kafkette.protocol.messages.sync_group_request import SyncGroupRequestAssignment
from kafkette.testing import ManualClock, close_memory_cluster, memory_cluster

pytestmark = pytest.mark.anyio

UNKNOWN_MEMBER_ID = 25


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def url(clock: ManualClock) -> Iterator[str]:
    name = f"groups-{uuid.uuid4().hex[:8]}"
    made = memory_cluster(name, clock=clock, properties={"group.min.session.timeout.ms": "100"})
    yield made
    close_memory_cluster(made)


def test_memory_cluster_uses_the_clock_and_properties(url: str, clock: ManualClock) -> None:
    """The broker's time is the manual clock; properties reach its config; a second cluster
    of the same name is refused."""
    broker = get_cluster(url).broker
    assert broker.now_ms() == clock.now_ms
    clock.advance(1_234)
    assert broker.now_ms() == clock.now_ms
    assert broker.config.group_min_session_timeout_ms == 100
    with pytest.raises(ValueError, match="exists already"):
        memory_cluster(url.removeprefix("memory://"))
    with pytest.raises(ValueError, match="only moves forward"):
        clock.advance(-1)


async def test_session_expires_when_the_clock_moves(url: str, clock: ManualClock) -> None:
    """A member joins over KafkaClient; advancing the clock by its session timeout makes the
    broker drop it (no real waiting for the timeout)."""
    async with KafkaClient(AdminConfig.from_user(bootstrap_servers=url)) as client:
        node = await client.coordinator("g")
        connection = await client.coordinator_connection(node)

        async def request(message: Any) -> Any:
            return await connection.request(message)

        join = JoinGroupRequest(
            group_id="g",
            session_timeout_ms=500,
            rebalance_timeout_ms=1_000,
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol("range", b"")],
        )
        member = (await request(join)).member_id
        join.member_id = member
        assert (await request(join)).generation_id == 1
        sync = SyncGroupRequest("g", 1, member, assignments=[SyncGroupRequestAssignment(member)])
        assert (await request(sync)).error_code == 0
        clock.advance(499)
        assert (await request(HeartbeatRequest("g", 1, member))).error_code == 0
        clock.advance(500)
        with anyio.fail_after(5):  # the timer loop looks at the clock every 100 ms
            while (await request(DescribeGroupsRequest(["g"]))).groups[0].members:
                await anyio.sleep(0.02)
        assert (await request(HeartbeatRequest("g", 1, member))).error_code == UNKNOWN_MEMBER_ID
