"""When share sessions end and who may use them: a session ends when the connection that
opened it closes (Kafka's ShareSessionCache disconnect listener), giving the member's
acquired records back; a ShareFetch or ShareAcknowledge of a member with no session is
SHARE_SESSION_NOT_FOUND; a ConsumerGroupHeartbeat naming a share group's id is
GROUP_ID_NOT_FOUND with Kafka's message."""

from __future__ import annotations

import functools
import struct
import uuid

import anyio
import anyio.abc
import pytest

from kafkette.protocol.headers import decode_response, encode_request
from kafkette.protocol.messages import ConsumerGroupHeartbeatRequest, ShareGroupHeartbeatRequest
from kafkette.protocol.messages.share_fetch_request import (
    FetchPartition,
    FetchTopic,
    ShareFetchRequest,
)
from kafkette.protocol.messages.share_fetch_response import AcquiredRecords
from kafkette.server.net.listener import serve_tcp
from tests.server.dataplane import FakeClock, call, make_broker
from tests.server.share.test_share_handlers import (
    GROUP_ID_NOT_FOUND,
    SHARE_SESSION_NOT_FOUND,
    Member,
    acquired,
    produce_values,
    setup,
)

pytestmark = pytest.mark.anyio

SHARE_GROUP_HEARTBEAT, SHARE_FETCH = 76, 78


async def roundtrip(
    stream: anyio.abc.ByteStream, request: object, version: int, key: int
) -> object:
    payload = bytes(encode_request(request, version, 1, "t"))  # type: ignore[arg-type]
    await stream.send(struct.pack(">i", len(payload)) + payload)
    received = b""
    while len(received) < 4 or len(received) < 4 + struct.unpack(">i", received[:4])[0]:
        received += await stream.receive()
    return decode_response(received[4:], key, version)[1]


@pytest.mark.parametrize("connections", ["auto", "socket"])
async def test_a_closed_connection_ends_its_share_session(connections: str) -> None:
    """A member acquires a record over a socket and the connection closes: its share
    session is gone and the record is AVAILABLE again (delivery count given back), so
    another member gets it at once, before any lock expires."""
    broker = make_broker(FakeClock())
    topic = broker.cluster.create_topic("t", 1)
    assert topic is not None
    member_id = str(uuid.uuid4())

    def fetch(epoch: int) -> ShareFetchRequest:
        return ShareFetchRequest(
            group_id="g",
            member_id=member_id,
            share_session_epoch=epoch,
            max_wait_ms=0,
            min_bytes=1,
            max_records=10,
            topics=[FetchTopic(topic.topic_id, [FetchPartition(0, 0, [])])],
        )

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            port = await tg.start(
                functools.partial(serve_tcp, connections=connections), broker, "127.0.0.1", 0
            )
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                joined = await roundtrip(
                    stream,
                    ShareGroupHeartbeatRequest(
                        group_id="g",
                        member_id=member_id,
                        member_epoch=0,
                        subscribed_topic_names=["t"],
                    ),
                    1,
                    SHARE_GROUP_HEARTBEAT,
                )
                assert joined.error_code == 0  # type: ignore[attr-defined]
                first = await roundtrip(stream, fetch(0), 1, SHARE_FETCH)
                assert acquired(first) == []  # type: ignore[arg-type]
                await produce_values(broker, b"held")
                held = await roundtrip(stream, fetch(1), 1, SHARE_FETCH)
                assert acquired(held) == [AcquiredRecords(0, 0, 1)]  # type: ignore[arg-type]
                assert broker.share_groups.sessions.get("g", member_id) is not None
            while broker.share_groups.sessions.get("g", member_id) is not None:
                await anyio.sleep(0.01)  # the server notices the close in its own task
            tg.cancel_scope.cancel()
    (share,) = broker.share_groups.partitions.values()
    assert {o: (r.state.name, r.delivery_count) for o, r in share.records().items()} == {
        0: ("AVAILABLE", 0)
    }
    other = Member(broker, topic.topic_id)
    await other.join()
    assert acquired(await other.fetch()) == [AcquiredRecords(0, 0, 1)]


async def test_a_member_without_a_session_gets_share_session_not_found() -> None:
    """A ShareFetch past epoch 0 or a ShareAcknowledge from a member id the broker has
    no share session for (never opened, or ended) is SHARE_SESSION_NOT_FOUND; Kafka's
    share-partition leader checks the session, not the group's membership."""
    broker, _, topic_id = setup()
    stranger = Member(broker, topic_id)
    stranger.epoch = 1
    response = await stranger.fetch()
    assert response.error_code == SHARE_SESSION_NOT_FOUND
    stranger.epoch = 1
    assert (await stranger.acknowledge([(0, 0, 1)])).error_code == SHARE_SESSION_NOT_FOUND
    member = Member(broker, topic_id)
    await member.join()
    await member.fetch()
    member.epoch = -1
    assert (await member.fetch()).error_code == 0  # closes the session
    member.epoch = 1
    assert (await member.fetch()).error_code == SHARE_SESSION_NOT_FOUND


async def test_a_consumer_group_heartbeat_for_a_share_group_is_refused() -> None:
    broker, _, topic_id = setup()
    await Member(broker, topic_id, group="queue").join()
    refused = await call(
        broker,
        ConsumerGroupHeartbeatRequest(
            group_id="queue",
            member_id=str(uuid.uuid4()),
            member_epoch=0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=["t"],
            topic_partitions=[],
        ),
        0,
    )
    assert (refused.error_code, refused.error_message) == (
        GROUP_ID_NOT_FOUND,
        "Group queue is not a consumer group.",
    )
    assert "queue" not in broker.consumer_groups.groups
