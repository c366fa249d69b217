"""Metadata cache (no I/O), backoff, and KafkaClient against kafkette serve and Tansu."""

from __future__ import annotations

import random
import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkette.client.backoff import backoff_ms
from kafkette.client.client import KafkaClient
from kafkette.client.config import AdminConfig
from kafkette.client.metadata import BrokerInfo, ClusterMetadata, MetadataCache
from kafkette.errors import KafkaTimeoutError, LeaderNotAvailableError
from kafkette.protocol.messages import MetadataResponse
from kafkette.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from tests.brokers import BrokerProcess, TansuProcess, free_port

TOPIC_ID = uuid.UUID(int=7)


def _response(leader: int = 1) -> MetadataResponse:
    return MetadataResponse(
        brokers=[MetadataResponseBroker(1, "h1", 9092), MetadataResponseBroker(2, "h2", 9093, "r")],
        cluster_id="c",
        controller_id=2,
        topics=[
            MetadataResponseTopic(
                name="t",
                topic_id=TOPIC_ID,
                partitions=[
                    MetadataResponsePartition(0, 1, 2, 5, [2, 1], [2]),
                    MetadataResponsePartition(0, 0, leader, 3, [1], [1]),
                ],
            ),
            MetadataResponseTopic(error_code=3, name="missing"),
        ],
    )


def test_snapshot_from_response() -> None:
    snapshot = ClusterMetadata.from_response(_response())
    assert snapshot.cluster_id == "c" and snapshot.controller_id == 2
    assert snapshot.brokers[2].rack == "r"
    assert [p.partition for p in snapshot.topics["t"].partitions] == [0, 1]
    assert snapshot.leader_for("t", 0) == 1 and snapshot.leader_for("t", 1) == 2
    assert snapshot.topics["t"].partitions[1].leader_epoch == 5
    assert snapshot.leader_for("t", 2) is None
    assert snapshot.partition_count("t") == 2
    assert snapshot.partition_count("missing") is None
    assert snapshot.topics["missing"].error is not None
    assert snapshot.topics["missing"].error.__name__ == "UnknownTopicOrPartitionError"


def test_leader_unknown_when_leader_is_minus_one_or_not_a_broker() -> None:
    assert ClusterMetadata.from_response(_response(leader=-1)).leader_for("t", 0) is None
    assert ClusterMetadata.from_response(_response(leader=9)).leader_for("t", 0) is None


def test_cache_refresh_policy_with_an_injected_clock() -> None:
    cache = MetadataCache(max_age_ms=1000)
    assert cache.needs_update(0)
    cache.update(ClusterMetadata.from_response(_response()), now_ms=100)
    assert not cache.needs_update(1099)
    assert cache.needs_update(1100)
    cache.update(ClusterMetadata.from_response(_response()), now_ms=1100)
    cache.request_update()
    assert cache.needs_update(1101)


def test_cache_merges_partial_updates() -> None:
    cache = MetadataCache(max_age_ms=1000)
    cache.update(ClusterMetadata.from_response(_response()), now_ms=0)
    cache.update(ClusterMetadata(cluster_id="c", brokers={}), now_ms=1)
    assert "t" in cache.snapshot.topics
    cache.update(ClusterMetadata(cluster_id="c"), now_ms=2, merge=False)
    assert cache.snapshot.topics == {}


def test_leader_hints_taken_only_with_a_newer_epoch_and_a_known_broker() -> None:
    """KIP-951, as Java's Metadata.updatePartitionLeadership: partition 0 is led by
    broker 1 at epoch 3, partition 1 by broker 2 at epoch 5."""
    cache = MetadataCache(max_age_ms=1000)
    cache.update(ClusterMetadata.from_response(_response()), now_ms=0)
    ignored = [
        ("t", 0, 2, 3),  # the known epoch again
        ("t", 0, 2, 2),  # an older epoch
        ("t", 0, 2, -1),  # no epoch
        ("t", 0, -1, 4),  # no leader
        ("t", 0, 7, 4),  # a broker known from neither the snapshot nor the answer
        ("t", 2, 2, 9),  # no such partition
        ("other", 0, 2, 9),  # a topic not in the snapshot
    ]
    assert cache.apply_leader_hints(ignored, ()) == set()
    assert cache.snapshot.leader_for("t", 0) == 1
    new_broker = BrokerInfo(3, "h3", 9094)
    taken = cache.apply_leader_hints([("t", 0, 3, 4), ("t", 1, 1, 6)], [new_broker])
    assert taken == {("t", 0), ("t", 1)}
    assert cache.snapshot.brokers[3] == new_broker
    partitions = cache.snapshot.topics["t"].partitions
    assert [(p.leader, p.leader_epoch) for p in partitions] == [(3, 4), (1, 6)]


@given(st.integers(0, 100), st.integers(1, 10_000), st.integers(0, 100_000))
def test_backoff_bounds(attempt: int, base: int, maximum: int) -> None:
    wait = backoff_ms(attempt, base, maximum, random.Random(attempt))
    ceiling = max(base, maximum)
    assert 0.8 * min(base * 2**attempt, ceiling) <= wait <= 1.2 * ceiling


def test_backoff_grows_exponentially() -> None:
    rng = random.Random(1)
    waits = [backoff_ms(n, 100, 10_000, rng) for n in range(5)]
    for n, wait in enumerate(waits):
        assert 0.8 * 100 * 2**n <= wait <= 1.2 * 100 * 2**n


@pytest.mark.anyio
async def test_bootstrap_skips_an_unreachable_server(memory_broker: BrokerProcess) -> None:
    config = AdminConfig.from_user(
        bootstrap_servers=[f"127.0.0.1:{free_port()}", memory_broker.bootstrap]
    )
    async with KafkaClient(config) as client:
        snapshot = await client.bootstrap()
        assert list(snapshot.brokers) == [1]
        assert snapshot.brokers[1].port == memory_broker.port


@pytest.mark.anyio
async def test_leader_of_auto_created_topic(memory_broker: BrokerProcess) -> None:
    async with KafkaClient(
        AdminConfig.from_user(bootstrap_servers=memory_broker.bootstrap)
    ) as client:
        await client.refresh_metadata(["auto"], allow_auto_topic_creation=True)
        assert await client.leader("auto", 0) == 1
        with pytest.raises(LeaderNotAvailableError):
            await client.leader("auto", 5)


@pytest.mark.anyio
async def test_leader_on_tansu(tansu: TansuProcess) -> None:
    tansu.create_topic("three", 3)
    async with KafkaClient(AdminConfig.from_user(bootstrap_servers=tansu.bootstrap)) as client:
        snapshot = await client.refresh_metadata(["three"])
        assert snapshot.partition_count("three") == 3
        assert await client.leader("three", 2) in snapshot.brokers


@pytest.mark.anyio
async def test_unreachable_bootstrap_fails_within_the_timeout() -> None:
    config = AdminConfig.from_user(
        bootstrap_servers=f"127.0.0.1:{free_port()}", retry_backoff_ms=20, reconnect_backoff_ms=20
    )
    started = time.monotonic()
    async with KafkaClient(config) as client:
        with pytest.raises(KafkaTimeoutError, match="could not fetch metadata"):
            await client.bootstrap(timeout_ms=500)
    assert time.monotonic() - started < 3
