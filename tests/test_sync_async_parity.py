"""One surface, sync and async: each client's methods have twins with the same parameters.

Every public method of :class:`AsyncProducer`, :class:`AsyncConsumer`,
:class:`AsyncAdminClient` and :class:`AsyncShareConsumer` has a twin in
:class:`Producer`, :class:`Consumer`, :class:`AdminClient` and
:class:`ShareConsumer` with the same parameter names, kinds and defaults, and
the reverse, except the few differences listed in :data:`ONLY_ASYNC`, each
with its reason (a twin under another name is in :data:`RENAMED`). A method
that waits (a coroutine on the async side) takes ``timeout=`` in seconds on
both sides, except those in
:data:`NO_TIMEOUT`. The last tests run the methods this parity added:
``send_and_wait`` and ``AsyncConsumer.poll_batches``, and a close that
gives up on undelivered records, in both forms.
"""

from __future__ import annotations

import inspect
import time
from typing import Any

import anyio
import pytest

from kafkette import (
    AdminClient,
    AsyncAdminClient,
    AsyncConsumer,
    AsyncProducer,
    AsyncShareConsumer,
    Consumer,
    NewTopic,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from kafkette.errors import KafkaTimeoutError
from kafkette.testing import MemoryCluster

PAIRS: list[tuple[type, type]] = [
    (AsyncProducer, Producer),
    (AsyncConsumer, Consumer),
    (AsyncAdminClient, AdminClient),
    (AsyncShareConsumer, ShareConsumer),
]

RENAMED: dict[tuple[type, str], str] = {
    (AsyncShareConsumer, "commit"): "commit_sync",  # Java's commitSync, as AsyncConsumer.commit
}
"""Twins under another name: the sync one keeps Kafka's."""

ONLY_ASYNC: dict[tuple[type, str], str] = {
    (AsyncProducer, "start"): (
        "the sync producer starts its I/O thread in its constructor, as Java's "
        "KafkaProducer; an async one cannot await there (aiokafka's start())"
    ),
}
"""Public methods without a sync twin, and why."""

NO_TIMEOUT: dict[tuple[type, str], str] = {
    (AsyncProducer, "send"): "waits at most max.block.ms (metadata, buffer room), as Java's send",
    (AsyncProducer, "start"): "opens no connection (the first record does)",
    (AsyncConsumer, "unsubscribe"): (
        "as Java's and kafka-python's unsubscribe(): runs the rebalance listener, and its "
        "LeaveGroup is bounded by request.timeout.ms"
    ),
    (AsyncShareConsumer, "unsubscribe"): (
        "as Java's unsubscribe(): its acknowledgements and leaving are bounded by "
        "default.api.timeout.ms"
    ),
    (AsyncAdminClient, "close"): "closes its connections without a request to wait for",
}
"""Async methods that wait yet take no ``timeout=``, and why."""

CONTEXT_AND_ITERATION = {
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
}


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(getattr(cls, name))
        for name in dir(cls)
        if not name.startswith("_") and inspect.isfunction(getattr(cls, name))
    }


def parameters(signature: inspect.Signature) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize(("async_cls", "sync_cls"), PAIRS, ids=lambda c: c.__name__)
def test_every_method_has_a_twin_with_the_same_parameters(async_cls: type, sync_cls: type) -> None:
    async_methods = {
        RENAMED.get((async_cls, name), name): signature
        for name, signature in public_methods(async_cls).items()
    }
    sync_methods = public_methods(sync_cls)
    assert len(async_methods) >= 9  # the comparison saw the operations
    only_async = {name for cls, name in ONLY_ASYNC if cls is async_cls}
    assert sorted(set(async_methods) - only_async) == sorted(sync_methods)
    assert only_async <= set(async_methods)  # no stale entry
    for name, signature in sync_methods.items():
        assert parameters(async_methods[name]) == parameters(signature), name


@pytest.mark.parametrize(("async_cls", "sync_cls"), PAIRS, ids=lambda c: c.__name__)
def test_context_managers_and_iteration_come_in_their_own_form(
    async_cls: type, sync_cls: type
) -> None:
    """``async with`` / ``with`` on every client; ``async for`` / ``for`` where either iterates."""
    for async_name, sync_name in CONTEXT_AND_ITERATION.items():
        assert hasattr(async_cls, async_name) == hasattr(sync_cls, sync_name), async_name
        assert not hasattr(sync_cls, async_name) and not hasattr(async_cls, sync_name)
    assert hasattr(async_cls, "__aenter__") and hasattr(async_cls, "__aexit__")


@pytest.mark.parametrize(("async_cls", "sync_cls"), PAIRS, ids=lambda c: c.__name__)
def test_methods_that_wait_take_a_timeout_in_seconds(async_cls: type, sync_cls: type) -> None:
    """A coroutine of the async client is a plain method of the sync one, and both take
    ``timeout=`` (seconds), but for the listed exceptions."""
    waiting = 0
    for name, signature in public_methods(async_cls).items():
        method = getattr(async_cls, name)
        if not inspect.iscoroutinefunction(method):
            twin = getattr(sync_cls, RENAMED.get((async_cls, name), name))
            assert not inspect.iscoroutinefunction(twin), name
            continue
        waiting += 1
        if (async_cls, name) in ONLY_ASYNC:
            continue
        twin = getattr(sync_cls, RENAMED.get((async_cls, name), name))
        assert not inspect.iscoroutinefunction(twin), name
        if (async_cls, name) in NO_TIMEOUT:
            assert "timeout" not in signature.parameters, f"{name}: drop it from NO_TIMEOUT"
            continue
        timeout = signature.parameters.get("timeout")
        assert timeout is not None, f"{async_cls.__name__}.{name} takes no timeout="
        assert timeout.default is None, name
    assert waiting >= (4 if async_cls is AsyncShareConsumer else 5)


# ---- the methods parity added, and close


def test_sync_send_and_wait_returns_the_metadata_or_times_out() -> None:
    with (
        MemoryCluster() as cluster,
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0) as producer,
    ):
        first = producer.send_and_wait("t", b"a", key=b"k", timeout=10)
        second = producer.send_and_wait("t", b"b", key=b"k")
        assert (first.topic, first.partition, first.offset) == ("t", 0, 0)
        assert (second.partition, second.offset) == (0, 1)
        cluster.faults.delay("Produce", 1.0)
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=r"not acknowledged within 0\.2s"):
            producer.send_and_wait("t", b"c", key=b"k", timeout=0.2)
        assert time.monotonic() - started < 0.9
        producer.flush(10)  # the record was not withdrawn: it is stored once
        cluster.faults.clear()
        assert [r.value for r in cluster.records("t", 0)] == [b"a", b"b", b"c"]


@pytest.mark.anyio
async def test_async_send_and_wait_returns_the_metadata_or_times_out() -> None:
    async with (
        MemoryCluster() as cluster,
        AsyncProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0) as producer,
    ):
        first = await producer.send_and_wait("t", b"a", key=b"k", timeout=10)
        assert (first.topic, first.partition, first.offset) == ("t", 0, 0)
        cluster.faults.delay("Produce", 1.0)
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=r"not acknowledged within 0\.2s"):
            await producer.send_and_wait("t", b"b", key=b"k", timeout=0.2)
        assert time.monotonic() - started < 0.9
        await producer.flush(10)
        cluster.faults.clear()
        assert [r.value for r in cluster.records("t", 0)] == [b"a", b"b"]


def test_sync_send_and_wait_sends_at_once_not_after_the_linger() -> None:
    """A record the caller waits for goes at once: linger.ms is a minute here. A record
    only sent keeps to the linger (as Java's send().get())."""
    with (
        MemoryCluster() as cluster,
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=60_000) as producer,
    ):
        started = time.monotonic()
        first = producer.send_and_wait("t", b"a", partition=0, timeout=10)
        second = producer.send_and_wait("t", b"b", partition=0, timeout=10)
        assert time.monotonic() - started < 5
        assert (first.offset, second.offset) == (0, 1)
        lingering = producer.send("t", b"c", partition=0)
        with pytest.raises(TimeoutError):
            lingering.result(0.2)
        producer.flush(10)
        assert lingering.result().offset == 2
        assert [r.value for r in cluster.records("t", 0)] == [b"a", b"b", b"c"]


@pytest.mark.anyio
async def test_async_send_and_wait_sends_at_once_not_after_the_linger() -> None:
    async with (
        MemoryCluster() as cluster,
        AsyncProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=60_000) as producer,
    ):
        started = time.monotonic()
        first = await producer.send_and_wait("t", b"a", partition=0, timeout=10)
        second = await producer.send_and_wait("t", b"b", partition=0, timeout=10)
        assert time.monotonic() - started < 5
        assert (first.offset, second.offset) == (0, 1)
        assert [r.value for r in cluster.records("t", 0)] == [b"a", b"b"]


def _produce_batches(bootstrap: str) -> None:
    """Three batches of 5 records (offsets 0-4, 5-9, 10-14) on topic "b", partition 0."""
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic("b", 1)], timeout=10).all()
    with Producer(bootstrap_servers=bootstrap, linger_ms=1000) as producer:
        for start in (0, 5, 10):
            for i in range(start, start + 5):
                producer.send("b", b"v%d" % i, partition=0)
            producer.flush(10)


@pytest.mark.anyio
async def test_async_poll_batches_hands_out_what_the_sync_one_does() -> None:
    tp = TopicPartition("b", 0)
    with MemoryCluster() as cluster:
        await anyio.to_thread.run_sync(_produce_batches, cluster.bootstrap_servers)
        settings = {"bootstrap_servers": cluster.bootstrap_servers, "fetch_max_wait_ms": 100}

        def sync_read() -> list[tuple[int, int, list[bytes | None]]]:
            got = []
            with Consumer(settings) as consumer:
                consumer.assign([tp])
                consumer.seek(tp, 7)
                while consumer.position(tp) < 15:
                    for fetched in consumer.poll_batches(timeout=0.2).get(tp, []):
                        values = [r.value for r in fetched.batch if r.offset >= fetched.position]
                        got.append((fetched.batch.base_offset, fetched.position, values))
                assert consumer.poll_batches(timeout=0.05) == {}
            return got

        got: list[tuple[int, int, list[bytes | None]]] = []
        async with AsyncConsumer(settings) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 7)
            with anyio.fail_after(20):
                while await consumer.position(tp) < 15:
                    for fetched in (await consumer.poll_batches(timeout=0.2)).get(tp, []):
                        values = [r.value for r in fetched.batch if r.offset >= fetched.position]
                        got.append((fetched.batch.base_offset, fetched.position, values))
            started = time.monotonic()
            assert await consumer.poll_batches(timeout_ms=100) == {}
            assert time.monotonic() - started >= 0.09
            with pytest.raises(TypeError, match="give one timeout"):
                await consumer.poll_batches(timeout=1.0, timeout_ms=1000)
            with pytest.raises(ValueError, match="max_offsets"):
                await consumer.poll_batches(max_offsets=0)
        assert got == [
            (5, 7, [b"v7", b"v8", b"v9"]),
            (10, 10, [b"v10", b"v11", b"v12", b"v13", b"v14"]),
        ]
        assert await anyio.to_thread.run_sync(sync_read) == got


def test_sync_close_fails_what_it_could_not_deliver_in_time() -> None:
    with MemoryCluster() as cluster:
        producer = Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0)
        producer.send_and_wait("t", b"first", timeout=10)
        cluster.faults.delay("Produce", 2.0)
        future = producer.send("t", b"late")
        started = time.monotonic()
        producer.close(timeout=0.3)
        assert time.monotonic() - started < 1.5
        error = future.exception(0)
        assert isinstance(error, KafkaTimeoutError)
        assert "closed after 0.3s with records undelivered" in str(error)
        cluster.faults.clear()


@pytest.mark.anyio
async def test_async_close_fails_what_it_could_not_deliver_in_time() -> None:
    async with MemoryCluster() as cluster:
        producer = AsyncProducer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0)
        await producer.start()
        await producer.send_and_wait("t", b"first", timeout=10)
        cluster.faults.delay("Produce", 2.0)
        future = await producer.send("t", b"late")
        started = time.monotonic()
        await producer.close(timeout=0.3)
        assert time.monotonic() - started < 1.5
        error = future.exception(0)
        assert isinstance(error, KafkaTimeoutError)
        assert "closed after 0.3s with records undelivered" in str(error)
        cluster.faults.clear()
