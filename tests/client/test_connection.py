"""BrokerConnection against kafkette serve and against Tansu, on asyncio and trio."""

from __future__ import annotations

import anyio
import pytest

from kafkette.client.connection import BrokerConnection
from kafkette.errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from kafkette.protocol.messages import ApiVersionsRequest, MetadataRequest, MetadataResponse
from kafkette.protocol.messages.metadata_request import MetadataRequestTopic
from tests.brokers import BrokerProcess, TansuProcess, free_port

pytestmark = pytest.mark.anyio


async def _pipelined_metadata(connection: BrokerConnection, count: int) -> list[str]:
    names: list[str] = []

    async def one(i: int) -> None:
        response = await connection.request(
            MetadataRequest(topics=[MetadataRequestTopic(name=f"t{i % 4}")])
        )
        assert isinstance(response, MetadataResponse)
        names.append(f"{i}:{response.topics[0].name}")

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, i)
    return names


async def test_negotiates_and_pipelines_with_kafkette(memory_broker: BrokerProcess) -> None:
    async with await BrokerConnection.connect("127.0.0.1", memory_broker.port) as connection:
        assert connection.broker_versions[18] == (0, 4)
        assert connection.version_for(MetadataRequest) == 12
        names = await _pipelined_metadata(connection, 200)
        assert sorted(names) == sorted(f"{i}:t{i % 4}" for i in range(200))
        assert connection.in_flight == 0


async def test_negotiates_and_pipelines_with_tansu(tansu: TansuProcess) -> None:
    """A broker nobody here wrote."""
    async with await BrokerConnection.connect("127.0.0.1", tansu.port) as connection:
        assert connection.version_for(ApiVersionsRequest) >= 3
        names = await _pipelined_metadata(connection, 100)
        assert sorted(names) == sorted(f"{i}:t{i % 4}" for i in range(100))


async def test_version_cap_and_unsupported_api(memory_broker: BrokerProcess) -> None:
    async with await BrokerConnection.connect("127.0.0.1", memory_broker.port) as connection:
        assert connection.version_for(MetadataRequest, maximum=9) == 9
        from kafkette.protocol.messages import DescribeQuorumRequest

        with pytest.raises(UnsupportedVersionError):
            connection.version_for(DescribeQuorumRequest)


async def test_unreachable_broker_fails_fast() -> None:
    port = free_port()
    with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{port} failed: Connection refused"):
        await BrokerConnection.connect("127.0.0.1", port, connect_timeout_s=5)


async def test_silent_broker_times_out() -> None:
    """A listener that accepts but never answers: ApiVersions times out."""
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as tg:

            async def accept_and_hold(stream: anyio.abc.SocketStream) -> None:
                async with stream:
                    await anyio.sleep_forever()

            tg.start_soon(listener.serve, accept_and_hold)
            with pytest.raises(KafkaTimeoutError):
                await BrokerConnection.connect("127.0.0.1", port, request_timeout_s=0.3)
            tg.cancel_scope.cancel()


async def test_broker_going_away_fails_waiters(memory_broker: BrokerProcess) -> None:
    connection = await BrokerConnection.connect("127.0.0.1", memory_broker.port)
    memory_broker.kill()
    with pytest.raises(KafkaConnectionError):
        await connection.request(MetadataRequest(topics=None))
    assert connection.closed
    with pytest.raises(KafkaConnectionError):
        await connection.request(MetadataRequest(topics=None))
