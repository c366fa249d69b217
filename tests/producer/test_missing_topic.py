"""A send to a topic the broker neither has nor creates fails within seconds, naming it.

With ``auto.create.topics.enable=false`` the broker answers the producer's metadata
request (which allows auto-creation) with UNKNOWN_TOPIC_OR_PARTITION, again and again.
Java waits ``max.block.ms`` (60 s) and then says the topic is "not present in metadata";
kafkette fails the send with UnknownTopicOrPartitionError after a few such answers over
at least a second (a topic created meanwhile by someone else is still found). Checked on
``memory://`` (in virtual time under trio's MockClock, and in real time) and on
``kafkette serve``, with ``max.block.ms`` long enough that a slow failure shows as one.
"""

from __future__ import annotations

import time

import anyio
import pytest
import trio
import trio.testing

from kafkette import AdminClient, AsyncAdminClient, AsyncProducer, NewTopic, Producer
from kafkette.errors import UnknownTopicOrPartitionError
from kafkette.producer.core import MISSING_TOPIC_GRACE_MS
from kafkette.testing import MemoryCluster
from tests.brokers import BrokerProcess

MAX_BLOCK_MS = 20_000
FAST_S = 8.0
"""Real seconds within which the failure counts as prompt, on a loaded 2-core machine."""


def assert_names_the_topic(error: UnknownTopicOrPartitionError, topic: str) -> None:
    assert error.detail is not None
    assert error.detail.startswith(
        f"topic {topic!r} does not exist and the broker does not create it: "
    )
    assert error.detail.endswith(
        "said UNKNOWN_TOPIC_OR_PARTITION (is auto.create.topics.enable false on the broker? "
        "create the topic first)"
    )


def test_missing_topic_fails_after_the_grace_in_virtual_time() -> None:
    """Answers come at 0, ~0.1, ~0.3, ~0.7 and ~1.5 s (retry.backoff.ms with jitter): the
    send fails at the first one at least MISSING_TOPIC_GRACE_MS after the first."""

    async def main() -> float:
        async with (
            MemoryCluster(in_loop=True, auto_create_topics_enable=False) as cluster,
            AsyncProducer(
                bootstrap_servers=cluster.bootstrap_servers, max_block_ms=MAX_BLOCK_MS
            ) as producer,
        ):
            started = trio.current_time()
            with pytest.raises(UnknownTopicOrPartitionError) as info:
                await producer.send("missing", b"v")
            assert_names_the_topic(info.value, "missing")
            return trio.current_time() - started

    real_started = time.monotonic()
    virtual = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert MISSING_TOPIC_GRACE_MS / 1000 <= virtual <= 2.0
    assert time.monotonic() - real_started < FAST_S


def test_a_topic_created_meanwhile_is_found() -> None:
    """Created 0.5 s (virtual) after the send began: within the grace, the record goes."""

    async def main() -> None:
        async with (
            MemoryCluster(in_loop=True, auto_create_topics_enable=False) as cluster,
            AsyncProducer(
                bootstrap_servers=cluster.bootstrap_servers, max_block_ms=MAX_BLOCK_MS
            ) as producer,
            AsyncAdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin,
        ):

            async def create_later() -> None:
                await trio.sleep(0.5)
                await admin.create_topics([NewTopic("late", 1)])

            async with trio.open_nursery() as nursery:
                nursery.start_soon(create_later)
                future = await producer.send("late", b"v")
            metadata = await future
            assert (metadata.topic, metadata.partition, metadata.offset) == ("late", 0, 0)
            assert [r.value for r in cluster.records("late")] == [b"v"]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_missing_topic_on_memory_cluster() -> None:
    with (
        MemoryCluster(auto_create_topics_enable=False) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap_servers, max_block_ms=MAX_BLOCK_MS) as p,
    ):
        started = time.monotonic()
        with pytest.raises(UnknownTopicOrPartitionError) as info:
            p.send("missing", b"v")
        assert time.monotonic() - started < FAST_S
        assert_names_the_topic(info.value, "missing")
        # the producer is fine: once the topic exists, the same send goes through
        with AdminClient(bootstrap_servers=cluster.bootstrap_servers) as admin:
            admin.create_topics([NewTopic("missing", 1)]).all()
        assert p.send("missing", b"v").result(10).offset == 0


def test_missing_topic_on_kafkette_serve() -> None:
    with BrokerProcess(args=("--set", "auto.create.topics.enable=false")) as broker:
        with Producer(bootstrap_servers=broker.bootstrap, max_block_ms=MAX_BLOCK_MS) as producer:
            started = time.monotonic()
            with pytest.raises(UnknownTopicOrPartitionError) as info:
                producer.send("missing", b"v")
            assert time.monotonic() - started < FAST_S
            assert_names_the_topic(info.value, "missing")

        async def send_async() -> UnknownTopicOrPartitionError:
            async with AsyncProducer(
                bootstrap_servers=broker.bootstrap, max_block_ms=MAX_BLOCK_MS
            ) as producer:
                with pytest.raises(UnknownTopicOrPartitionError) as info:
                    await producer.send("other", b"v")
                return info.value

        started = time.monotonic()
        error = anyio.run(send_async)
        assert time.monotonic() - started < FAST_S
        assert_names_the_topic(error, "other")


def test_auto_created_topic_is_still_waited_for() -> None:
    """With auto-creation on (the default) the first send creates the topic."""
    with (
        MemoryCluster() as cluster,
        Producer(bootstrap_servers=cluster.bootstrap_servers, max_block_ms=MAX_BLOCK_MS) as p,
    ):
        assert p.send("created", b"v").result(10).offset == 0
