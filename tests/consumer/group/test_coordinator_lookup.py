"""KafkaClient.coordinator: FindCoordinator, the cache, invalidation, a connection of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from tests.brokers import TansuProcess, tansu_broker


@pytest.fixture(scope="module")
def tansu_process() -> Iterator[TansuProcess]:
    yield from tansu_broker()


@pytest.mark.anyio
async def test_coordinator_is_found_cached_and_reached_on_its_own_connection(
    tansu_process: TansuProcess,
) -> None:
    client = KafkaClient(AdminConfig.from_user(bootstrap_servers=tansu_process.bootstrap))
    async with client:
        node = await client.coordinator("g1")
        metadata = await client.bootstrap()
        assert node in metadata.brokers
        assert await client.coordinator("g1") == node
        sent = []
        original = client._find_coordinator

        async def counting(key: str, key_type: int) -> int:
            sent.append((key, key_type))
            return await original(key, key_type)

        client._find_coordinator = counting  # type: ignore[method-assign]
        assert await client.coordinator("g1") == node
        assert sent == []
        client.invalidate_coordinator("g1")
        assert await client.coordinator("g1") == node
        assert sent == [("g1", 0)]
        coordinator_connection = await client.coordinator_connection(node)
        assert coordinator_connection is not await client.connection(node)
        assert coordinator_connection is await client.coordinator_connection(node)
