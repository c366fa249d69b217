"""A disk broker killed with SIGKILL while a share group holds records, then restarted on
its data directory: ``__share_group_state`` is replayed, so the accepted records are
never delivered again, the records in flight at the crash come back (to confluent-kafka's
``ShareConsumer``), and the share partition's start offset holds."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer

from kafkette import AdminClient, NewTopic, Producer
from kafkette.client.connection import BrokerConnection
from kafkette.protocol.messages.share_acknowledge_request import (
    AcknowledgementBatch,
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from kafkette.protocol.messages.share_acknowledge_response import ShareAcknowledgeResponse
from kafkette.protocol.messages.share_fetch_request import (
    FetchPartition,
    FetchTopic,
    ShareFetchRequest,
)
from kafkette.protocol.messages.share_fetch_response import AcquiredRecords, ShareFetchResponse
from kafkette.protocol.messages.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from kafkette.protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from tests.brokers import BrokerProcess

pytestmark = pytest.mark.anyio

GROUP, TOPIC = "restart-group", "jobs"


@pytest.fixture
def anyio_backend() -> str:
    """One event loop is enough: the broker is another process (and CI's time is short)."""
    return "asyncio"


async def share_fetch(
    connection: BrokerConnection, member_id: str, epoch: int, topic_id: uuid.UUID
) -> list[AcquiredRecords]:
    response = await connection.request(
        ShareFetchRequest(
            group_id=GROUP,
            member_id=member_id,
            share_session_epoch=epoch,
            max_records=100,
            topics=[FetchTopic(topic_id, [FetchPartition(0)])],
        ),
        version=2,
    )
    assert isinstance(response, ShareFetchResponse) and response.error_code == 0
    return [r for t in response.responses for p in t.partitions for r in p.acquired_records]


async def test_accepted_stay_accepted_and_in_flight_come_back(tmp_path: Path) -> None:
    """Records 0-9 accepted and 10-19 acquired, unacknowledged, when the broker is
    killed: after the restart a ShareConsumer receives exactly 10-19, and record
    ``before`` (in the log before the share partition started) never."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        with AdminClient(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, 1)]).all()
            topic_id = admin.describe_topics([TOPIC]).all()[TOPIC].topic_id
        with Producer(bootstrap_servers=broker.bootstrap) as producer:
            producer.send(TOPIC, b"before").result(10)
        host, port = broker.bootstrap.split(":")
        connection = await BrokerConnection.connect(host, int(port))
        member = str(uuid.uuid4())
        joined = await connection.request(
            ShareGroupHeartbeatRequest(
                group_id=GROUP, member_id=member, member_epoch=0, subscribed_topic_names=[TOPIC]
            ),
            version=1,
        )
        assert isinstance(joined, ShareGroupHeartbeatResponse) and joined.error_code == 0
        assert await share_fetch(connection, member, 0, topic_id) == []
        with Producer(bootstrap_servers=broker.bootstrap) as producer:
            for number in range(20):
                producer.send(TOPIC, f"job-{number}".encode())
            producer.flush(10)
        assert await share_fetch(connection, member, 1, topic_id) == [AcquiredRecords(1, 20, 1)]
        acked = await connection.request(
            ShareAcknowledgeRequest(
                group_id=GROUP,
                member_id=member,
                share_session_epoch=2,
                topics=[
                    AcknowledgeTopic(
                        topic_id, [AcknowledgePartition(0, [AcknowledgementBatch(1, 10, [1])])]
                    )
                ],
            ),
            version=2,
        )
        assert isinstance(acked, ShareAcknowledgeResponse)
        assert [p.error_code for t in acked.responses for p in t.partitions] == [0]
        broker.kill()
        await connection.aclose()
        broker.start()  # the same port and data directory
        consumer = ShareConsumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": GROUP,
                "share.acknowledgement.mode": "explicit",
            }
        )
        seen: list[tuple[int, bytes | None]] = []
        try:
            consumer.subscribe([TOPIC])
            deadline = time.monotonic() + 60
            settle: float | None = None
            while settle is None or time.monotonic() < settle:
                assert time.monotonic() < deadline, f"received only {seen}"
                messages = consumer.poll(0.3)
                for message in messages:
                    assert message.error() is None, message.error()
                    seen.append((message.offset(), message.value()))
                    consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                if messages:
                    consumer.commit_sync(10)
                if settle is None and len(seen) >= 10:
                    settle = time.monotonic() + 2  # and nothing more comes
        finally:
            consumer.close()
        assert sorted(seen) == [(n + 1, f"job-{n}".encode()) for n in range(10, 20)]
    finally:
        broker.close()
