"""A KIP-848 member learns its assignment's topic names from the subscribed topics'
metadata, never from every topic's (which on a broker of many partitions cost each
joining member a large answer)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import anyio
import pytest

from kafkette import AsyncAdminClient, AsyncConsumer, NewTopic
from kafkette.client.client import KafkaClient
from kafkette.structs import TopicPartition
from kafkette.testing import MemoryCluster

pytestmark = pytest.mark.anyio


async def assigned_with_requests(
    monkeypatch: pytest.MonkeyPatch, subscription: list[str] | str
) -> tuple[set[TopicPartition], list[list[str] | None], set[str]]:
    """Join a KIP-848 group beside a wide topic; the assignment, every metadata refresh's
    topics (None: every topic) and the topics the consumer's metadata then holds."""
    refreshes: list[list[str] | None] = []
    refresh = KafkaClient.refresh_metadata

    async def recorded(self: KafkaClient, topics: Iterable[str] | None = None, **kw: Any) -> Any:
        refreshes.append(None if topics is None else sorted(topics))
        return await refresh(self, topics, **kw)

    monkeypatch.setattr(KafkaClient, "refresh_metadata", recorded)
    with MemoryCluster() as cluster:
        async with AsyncAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            await admin.create_topics([NewTopic("orders", 3, 1), NewTopic("wide", 50, 1)])
        async with AsyncConsumer(
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=f"g-{uuid.uuid4().hex[:6]}",
            group_protocol="consumer",
        ) as consumer:
            consumer.subscribe(subscription)
            with anyio.fail_after(20):
                while len(consumer.assignment()) < 3:
                    await consumer.poll(timeout_ms=50)
            known = set(consumer._core.client.metadata.snapshot.topics)
            return consumer.assignment(), refreshes, known


async def test_a_named_subscription_asks_for_its_topics_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assignment, refreshes, known = await assigned_with_requests(monkeypatch, ["orders"])
    assert assignment == {TopicPartition("orders", p) for p in range(3)}
    assert ["orders"] in refreshes
    assert None not in refreshes
    assert "wide" not in known


async def test_a_regex_subscription_still_asks_for_every_topic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assignment, refreshes, known = await assigned_with_requests(monkeypatch, "^ord.*")
    assert assignment == {TopicPartition("orders", p) for p in range(3)}
    assert None in refreshes
    assert {"orders", "wide"} <= known
