"""KafkaClient.coordinator: FindCoordinator, the cache, invalidation, a connection of its own."""

from __future__ import annotations

import pytest

from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.protocol.messages import HeartbeatRequest, HeartbeatResponse
from tests.consumer.targets import Target

UNKNOWN_MEMBER_ID = 25


class CountingClient(KafkaClient):
    """Counts the FindCoordinator lookups it sends."""

    lookups: list[tuple[str, int]]

    async def _find_coordinator(self, key: str, key_type: int) -> int:
        self.lookups.append((key, key_type))
        return await super()._find_coordinator(key, key_type)


@pytest.mark.anyio
async def test_coordinator_is_found_cached_and_reached_on_its_own_connection(
    every_group_target: Target, group: str
) -> None:
    client = CountingClient(AdminConfig.from_user(bootstrap_servers=every_group_target.bootstrap))
    client.lookups = []
    async with client:
        node = await client.coordinator(group)
        metadata = await client.bootstrap()
        assert node in metadata.brokers
        assert await client.coordinator(group) == node
        assert client.lookups == [(group, 0)]
        client.invalidate_coordinator(group)
        assert await client.coordinator(group) == node
        assert client.lookups == [(group, 0), (group, 0)]
        coordinator_connection = await client.coordinator_connection(node)
        assert coordinator_connection is not await client.connection(node)
        assert coordinator_connection is await client.coordinator_connection(node)


@pytest.mark.anyio
async def test_send_to_coordinator_and_forgetting_it_when_the_connection_breaks(
    group_target: Target, group: str
) -> None:
    client = CountingClient(AdminConfig.from_user(bootstrap_servers=group_target.bootstrap))
    client.lookups = []
    async with client:
        request = HeartbeatRequest(group_id=group, generation_id=1, member_id="nobody")
        response = await client.send_to_coordinator(group, request)
        assert isinstance(response, HeartbeatResponse)
        assert response.error_code == UNKNOWN_MEMBER_ID
        node = await client.coordinator(group)
        connection = await client.coordinator_connection(node)
        await connection.aclose()
        assert client.lookups == [(group, 0)]
        response = await client.send_to_coordinator(group, request)
        assert isinstance(response, HeartbeatResponse)
        assert client.lookups == [(group, 0), (group, 0)]
        assert await client.coordinator_connection(node) is not connection
