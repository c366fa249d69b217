"""Sends waiting for room in ``buffer.memory`` are all woken when it frees, in their order.

The async producer kept the event of a send waiting for room in one attribute: a second
waiting send replaced the first one's, so the first slept until ``max.block.ms`` although
the room had been freed. Here three tasks wait on a full buffer: the first to wait sends
the lingering batch at once (Java's rule: a batch is sendable whatever its linger while
sends wait for room), and a fault holds the broker's answer for ``HOLD_S``; once it is
acknowledged each must proceed at once, in the order they waited, and every record must
be stored once, at the offsets that order gives. ``max.block.ms`` is 20 s; the bound of
10 s only catches a waiter that was not woken.
"""

from __future__ import annotations

import anyio
import pytest

from kafkette import AsyncConsumer, AsyncProducer
from kafkette.errors import BufferExhaustedError
from kafkette.producer.futures import RecordFuture
from kafkette.structs import TopicPartition
from kafkette.testing import MemoryCluster

TOPIC = "waiters"
RECORD = 21 + 1_000  # record_size of a 1,000-byte value without key or headers
BUFFER = 4 * RECORD - 1  # three records fit, a fourth does not
BOUND_S = 10
WAITERS = 3
HOLD_S = 1.0
"""How long the broker holds its answer to the filling records (real time): the waiting
sends are all queued within it, and a send waiting 300 ms gives up within it."""


def value(i: int) -> bytes:
    return b"%04d" % i * 250  # 1,000 bytes


async def stored(bootstrap: str, count: int) -> list[tuple[int, bytes | None]]:
    """(offset, value) of the first ``count`` records of partition 0."""
    rows: list[tuple[int, bytes | None]] = []
    async with AsyncConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=50
    ) as consumer:
        consumer.assign([TopicPartition(TOPIC, 0)])
        with anyio.fail_after(BOUND_S):
            while len(rows) < count:
                for batch in (await consumer.poll(timeout=0.1)).values():
                    rows.extend((r.offset, r.value) for r in batch)
    return rows


def producer(bootstrap: str, **settings: object) -> AsyncProducer:
    return AsyncProducer(
        bootstrap_servers=bootstrap,
        buffer_memory=BUFFER,
        batch_size=16_384,  # above buffer.memory: the batch is never full
        linger_ms=60_000,  # nothing is sent before the buffer is full, or a flush
        max_block_ms=20_000,
        **settings,
    )


async def fill(producer: AsyncProducer, cluster: MemoryCluster) -> list[RecordFuture]:
    """The topic's metadata and a first record acknowledged, then a full buffer, whose
    batch the broker answers ``HOLD_S`` after it is sent."""
    await producer.send(TOPIC, b"warm-up", partition=0)
    await producer.flush()
    cluster.faults.delay("Produce", HOLD_S, times=1)
    return [await producer.send(TOPIC, value(i), partition=0) for i in range(1, 4)]


@pytest.mark.anyio
async def test_every_send_waiting_for_room_proceeds_when_it_frees(anyio_backend: str) -> None:
    sent: list[tuple[int, RecordFuture]] = []

    async def send(i: int) -> None:
        sent.append((i, await producer_.send(TOPIC, value(i), partition=0)))

    with MemoryCluster() as cluster:
        async with producer(cluster.bootstrap_servers) as producer_:
            filled = await fill(producer_, cluster)
            with anyio.fail_after(BOUND_S):
                async with anyio.create_task_group() as tg:
                    for i in range(4, 4 + WAITERS):
                        tg.start_soon(send, i)
                        await anyio.wait_all_tasks_blocked()  # waiting, in this order
                    assert sent == []
                    assert producer_.metrics()["buffer_bytes_used"] == 3 * RECORD
                # no flush asked: the first waiter sent the lingering batch
                assert [i for i, _ in sent] == [4, 5, 6]
                await producer_.flush()
            assert [(await f).offset for f in filled] == [1, 2, 3]
            assert [(i, (await f).offset) for i, f in sent] == [(4, 4), (5, 5), (6, 6)]
        rows = await stored(cluster.bootstrap_servers, 7)
    assert rows == [(0, b"warm-up")] + [(i, value(i)) for i in range(1, 7)]


@pytest.mark.anyio
async def test_a_send_that_finds_others_waiting_queues_behind_them(anyio_backend: str) -> None:
    """A send made while others wait does not take the room first, even when it would fit
    and theirs would not yet: a large record is not starved by small ones."""
    order: list[str] = []

    with MemoryCluster() as cluster:
        async with producer(cluster.bootstrap_servers) as producer_:
            await fill(producer_, cluster)

            async def send(name: str, payload: bytes) -> None:
                await producer_.send(TOPIC, payload, partition=0)
                order.append(name)

            with anyio.fail_after(BOUND_S):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(send, "large", b"L" * 2_500)
                    await anyio.wait_all_tasks_blocked()
                    tg.start_soon(send, "small", b"s")
                    await anyio.wait_all_tasks_blocked()
                    assert order == []
                await producer_.flush()
            assert order == ["large", "small"]
        rows = await stored(cluster.bootstrap_servers, 6)
    assert [v for _, v in rows[4:]] == [b"L" * 2_500, b"s"]


@pytest.mark.anyio
async def test_waiters_that_get_no_room_fail_after_max_block_ms(anyio_backend: str) -> None:
    """Nothing is acknowledged within ``max.block.ms`` (the broker holds its answer
    longer): each waiting send raises BufferExhaustedError, and none of their records
    is stored."""
    errors: list[BaseException] = []

    with MemoryCluster() as cluster:
        async with AsyncProducer(
            bootstrap_servers=cluster.bootstrap_servers,
            buffer_memory=BUFFER,
            batch_size=16_384,
            linger_ms=60_000,
            max_block_ms=300,
        ) as producer_:
            await fill(producer_, cluster)

            async def send(i: int) -> None:
                with pytest.raises(BufferExhaustedError) as caught:
                    await producer_.send(TOPIC, value(i), partition=0)
                errors.append(caught.value)

            with anyio.fail_after(BOUND_S):
                async with anyio.create_task_group() as tg:
                    for i in range(4, 4 + WAITERS):
                        tg.start_soon(send, i)
            assert [str(e) for e in errors] == [
                f"{3 * RECORD} of buffer.memory={BUFFER} bytes stayed in use for "
                f"max.block.ms=300; {RECORD} more were needed"
            ] * WAITERS
            await producer_.flush()
        rows = await stored(cluster.bootstrap_servers, 4)
    assert rows == [(0, b"warm-up")] + [(i, value(i)) for i in range(1, 4)]
