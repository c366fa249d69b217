"""A record with an explicit partition or a delivery callback takes the producers' fast
path (``routes.send``).

The general path (``ProducerCore.prepare_send``: serializers, headers, transactions,
waiting for metadata) cost a sync ``send`` about 6 µs against 1.5 µs for a record whose
partition the producer chooses; a partition the topic has is now appended as directly,
and so is a record with a delivery callback once its partition has an open batch.
What the fast path declines (a bool, a negative or unknown partition) still reaches the
general path, which raises or waits as before.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kafkette import AsyncProducer, Producer
from kafkette.errors import UnknownTopicOrPartitionError
from kafkette.producer import accumulator
from kafkette.producer.core import ProducerCore
from kafkette.producer.futures import RecordMetadata
from kafkette.testing import MemoryCluster

T0 = 1_700_000_000_000


def refuse_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the general path fail; without the C record encoder (KAFKETTE_NO_EXTENSIONS)
    every record takes it, and only the records' placement is checked."""
    if accumulator._encode_plain is None:
        return

    def general(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the record took the general path")

    monkeypatch.setattr(ProducerCore, "prepare_send", general)


def test_sync_send_to_a_given_partition_takes_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with (
        MemoryCluster(num_partitions=3) as cluster,
        Producer(bootstrap_servers=cluster.bootstrap_servers, max_block_ms=2_000) as p,
    ):
        # the first send waits for the topic's metadata; the next caches its count
        assert p.send("t", b"first", partition=1, timestamp=T0).result(10) == (
            RecordMetadata("t", 1, 0, T0)
        )
        p.send("t", b"second", partition=1).result(10)
        with monkeypatch.context() as patched:
            refuse_the_general_path(patched)
            futures = [p.send("t", b"v%d" % i, partition=2, timestamp=T0 + i) for i in range(3)]
            futures.append(p.send("t", b"k", key=b"key", partition=0, timestamp=T0))
        assert [f.result(10) for f in futures] == [
            RecordMetadata("t", 2, 0, T0),
            RecordMetadata("t", 2, 1, T0 + 1),
            RecordMetadata("t", 2, 2, T0 + 2),
            RecordMetadata("t", 0, 0, T0),
        ]
        # what the fast path declines, the general path refuses as before
        with pytest.raises(ValueError, match="non-negative int, got True"):
            p.send("t", b"v", partition=True)
        with pytest.raises(ValueError, match="non-negative int, got -1"):
            p.send("t", b"v", partition=-1)
        with pytest.raises(UnknownTopicOrPartitionError, match="has 3 partition"):
            p.send("t", b"v", partition=3)


def test_sync_send_with_a_delivery_callback_takes_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once a batch is open, a record with a callback is appended as directly; each
    callback runs once, in order, in the producer's thread, with its record's metadata."""
    delivered: list[tuple[BaseException | None, RecordMetadata | None, str]] = []

    def on_delivery(error: BaseException | None, metadata: RecordMetadata | None) -> None:
        delivered.append((error, metadata, threading.current_thread().name))

    with (
        MemoryCluster() as cluster,
        Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=200) as p,
    ):
        p.send("t", b"first").result(10)
        p.send("t", b"second").result(10)
        p.send("t", b"opens", timestamp=T0)  # the batch the next ones join (linger 200 ms)
        with monkeypatch.context() as patched:
            refuse_the_general_path(patched)
            futures = [
                p.send("t", b"v%d" % i, timestamp=T0 + i, on_delivery=on_delivery)
                for i in range(1, 4)
            ]
        p.flush()
        assert [f.result(0) for f in futures] == [
            RecordMetadata("t", 0, i + 2, T0 + i) for i in (1, 2, 3)
        ]
    assert [(e, md) for e, md, _ in delivered] == [
        (None, RecordMetadata("t", 0, i + 2, T0 + i)) for i in (1, 2, 3)
    ]
    assert {thread for _, _, thread in delivered} == {"kafkette producer"}


@pytest.mark.anyio
async def test_async_send_to_a_given_partition_takes_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with (
        MemoryCluster(in_loop=True, num_partitions=3) as cluster,
        AsyncProducer(bootstrap_servers=cluster.bootstrap_servers, max_block_ms=2_000) as p,
    ):
        await (await p.send("t", b"first", partition=1))
        await (await p.send("t", b"second", partition=1))
        with monkeypatch.context() as patched:
            refuse_the_general_path(patched)
            futures = [
                await p.send("t", b"v%d" % i, partition=2, timestamp=T0 + i) for i in range(3)
            ]
        assert [await f for f in futures] == [RecordMetadata("t", 2, i, T0 + i) for i in range(3)]
        with pytest.raises(ValueError, match="non-negative int, got -1"):
            await p.send("t", b"v", partition=-1)
