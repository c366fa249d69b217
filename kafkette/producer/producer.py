"""AsyncProducer: the producer on anyio (asyncio or trio).

Use it as an async context manager, which starts the sender and, on exit,
delivers what is pending (``close``)::

    async with AsyncProducer(bootstrap_servers="localhost:9092") as producer:
        future = await producer.send("events", b"value", key=b"key")
        metadata = await future          # RecordMetadata(topic, partition, offset, timestamp)

``await producer.start()`` / ``await producer.close()`` work too, from the
same task. ``send`` awaits only when it must: for the metadata of a topic it
has not seen yet, or for room in ``buffer.memory`` (sends waiting for it
go in the order they came, each woken once room frees); the returned future
resolves when the broker acknowledges the record. A task sending in a tight
loop does not let the event loop run until it awaits something (a future,
``flush``, or a full buffer): that is the fastest way to produce. Under
asyncio such a ``send`` writes the full batches itself every
:data:`~kafkette.producer.sender.NEWS_WRITE` bytes, but the answers are read
(and futures resolved) only when the loop runs: await now and then if
delivery latency matters.

With a ``transactional_id``, records are sent in transactions (Java's
semantics: see :mod:`kafkette.producer.transactions`)::

    async with AsyncProducer(bootstrap_servers=..., transactional_id="copier-1") as producer:
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send("out", b"value")
        await producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        await producer.commit_transaction()   # or abort_transaction()
"""

from __future__ import annotations

import functools
import uuid
from collections import deque
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from kafkette.client import telemetry
from kafkette.client.client import check_connection_settings
from kafkette.client.config import ProducerConfig
from kafkette.client.events import event_factory
from kafkette.client.sync_bridge import documented_as
from kafkette.clocks import loop_clock_ms
from kafkette.errors import IllegalStateError, KafkaTimeoutError
from kafkette.producer.accumulator import BufferFull
from kafkette.producer.buffer_waiters import BufferWaiters, Waiter
from kafkette.producer.core import HeadersArg, ProducerCore
from kafkette.producer.futures import DeliveryCallback, RecordFuture, RecordMetadata
from kafkette.producer.txn_runner import TransactionRunner
from kafkette.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition


class AsyncProducer:
    """Sends records to Kafka; configured with Kafka's settings (see :class:`ProducerConfig`)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = ProducerConfig.from_user(config, **settings)
        check_connection_settings(self.config)  # as the sync client's construction does
        self._core: ProducerCore | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._waiters: BufferWaiters | None = None
        self._waiting: deque[Waiter] = deque()  # the waiters' queue, read by every send
        self._closed = False  # before it started

    async def start(self) -> None:
        """Start the sender task (no connection is opened until the first record)."""
        if self._core is not None:
            raise IllegalStateError("the producer was already started")
        core = self._core = ProducerCore(self.config, clock=loop_clock_ms())
        core.accumulator.wakeup = core.sender.news
        self._waiters = BufferWaiters(core.accumulator, event_factory())
        self._waiting = self._waiters.queue
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(core.sender.run)
        self._task_group.start_soon(telemetry.run, core.client)

    def _running(self) -> ProducerCore:
        core = self._core
        if core is None:
            if self._closed:
                raise IllegalStateError("the producer is closed")
            raise IllegalStateError("the producer is not started: use 'async with' or start()")
        core.check_open()
        return core

    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Queue a record; return its future (``await`` it for the :class:`RecordMetadata`).

        ``on_delivery(error, metadata)`` is called in the event loop when the
        record is acknowledged or fails. ``timestamp`` is in ms since the
        epoch (default: now).
        """
        core = self._core
        if core is None:
            core = self._running()  # raises
        if core.closed:
            core.check_open()  # raises
        # The common record goes straight to the C append (a producer with serializers
        # or transactions once prepare_record did those steps); what it declines takes
        # the general path below, as does every record while sends wait for room (it
        # queues behind them).
        if core.sender.fatal_error is None and not self._waiting:
            future = core.routes.send(topic, value, key, timestamp, partition, on_delivery, headers)
            if future is not None:
                return future
            serialized = core.routes.prepared
            if serialized:
                value, key = core.prepare_record(value, key)
                future = core.routes.send_prepared(
                    topic, value, key, timestamp, partition, on_delivery, headers
                )
                if future is not None:
                    return future
        else:
            serialized = False
        trace = None
        if core.telemetry is not None:  # the record's span; its end is the delivery callback
            trace = core.telemetry.start_send(topic, key, value, headers, on_delivery)
            headers, on_delivery = trace.headers, trace
        try:
            routed = core.prepare_send(topic, value, key, headers, partition, timestamp, serialized)
            count = 0 if routed[0] is not None else await core.wait_for_topic(topic, partition)
            chosen = core.admit(topic, routed, partition, count)
            if trace is not None:
                trace.partition = chosen
            _, key_b, value_b, headers_l, timestamp = routed
            append = functools.partial(
                core.accumulator.append,
                topic,
                chosen,
                timestamp,
                key_b,
                value_b,
                headers_l,
                on_delivery,
                block=False,
            )
            if not self._waiting:
                try:
                    return append()
                except BufferFull:
                    pass
            waiters = self._waiters
            assert waiters is not None
            deadline = core.clock() + self.config.max_block_ms
            with waiters.place() as waiter:
                while True:
                    remaining = deadline - core.clock()
                    if remaining > 0:
                        with anyio.move_on_after(remaining / 1000):
                            await waiter.wait()  # first in the queue, and room was freed
                    try:
                        return append()
                    except BufferFull as full:
                        if core.clock() >= deadline:
                            raise core.buffer_exhausted(full) from None
        except BaseException as exc:
            if trace is not None:
                trace.abandon(exc)
            raise

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp: int | None = None,
        timeout: float | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its acknowledgement, up to ``timeout`` seconds
        (default: no limit but ``delivery.timeout.ms``).

        The record's batch is sent at once, not after ``linger.ms``: its caller waits
        for it, so nothing more of theirs will join it (every batch queued meanwhile
        goes at once too, as during :meth:`flush`). ``send(...)`` then waiting on the
        future keeps to ``linger.ms``, as Java's ``send(...).get()`` does.

        Raises the record's delivery error, or :class:`KafkaTimeoutError` when the
        timeout passes first (the record may still be delivered later).
        """
        future = await self.send(topic, value, key, headers, partition, timestamp)
        if future.done():
            return future.result()
        with self._running().flushing(), anyio.move_on_after(timeout):
            return await future
        raise KafkaTimeoutError(f"the record was not acknowledged within {timeout}s")

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until it is acknowledged or failed.

        Raises :class:`KafkaTimeoutError` if that takes longer than ``timeout`` seconds,
        and the sender's error once it failed (every record pending failed with it).
        """
        with self._running().flushing() as results:
            with anyio.move_on_after(timeout) as scope:
                for result in results:
                    await result.wait_async()
            if scope.cancelled_caught:
                raise KafkaTimeoutError(f"flush did not complete within {timeout}s")

    # ---- transactions

    def _runner(self) -> TransactionRunner:
        return self._running().transaction_runner()

    def _timeout_s(self, timeout: float | None) -> float:
        return self._running().timeout_s(timeout)

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Get the producer id and epoch of the ``transactional.id`` (fencing older
        producers with the same id and completing their open transaction).

        Call once, before the first transaction; ``timeout`` in seconds (default
        ``max.block.ms``). After a timeout, call it again to keep waiting. Also
        valid after a commit or abort that timed out: the epoch is bumped, so
        the earlier EndTxn cannot apply to a later transaction.
        """
        await self._runner().init_transactions(self._timeout_s(timeout))

    def begin_transaction(self) -> None:
        """Open a transaction: records sent from now on are part of it."""
        self._runner().manager.begin_transaction()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: ConsumerGroupMetadata,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's ``offsets`` as part of the open transaction.

        ``group_metadata`` is the consuming consumer's ``group_metadata()``: a
        member fenced by a rebalance gets its commit refused.
        """
        await self._runner().send_offsets(offsets, group_metadata, self._timeout_s(timeout))

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction, then commit it.

        If a record failed, raises its error and the transaction can only be
        aborted. After a :class:`KafkaTimeoutError`, call it again to wait for
        the same commit.
        """
        await self._runner().commit(self._timeout_s(timeout))

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the open transaction: its records never reach read_committed consumers."""
        await self._runner().abort(self._timeout_s(timeout))

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what is pending (up to ``timeout`` seconds), then stop.

        Records still undelivered after the timeout fail with
        :class:`KafkaTimeoutError`. An open transaction is aborted. Idempotent.
        """
        core = self._core
        if core is None:
            self._closed = True
            return
        if not core.mark_closed():
            return
        assert self._task_group is not None
        try:
            await core.shutdown(timeout)
        finally:
            await self._task_group.__aexit__(None, None, None)

    @documented_as(telemetry.client_instance_id)
    async def client_instance_id(self, timeout: float | None = None) -> uuid.UUID:
        return await telemetry.client_instance_id(self._running().client, timeout)

    def metrics(self) -> dict[str, float]:
        """Counters: records/bytes/batches/requests sent, retries, errors, latency, buffer."""
        if self._core is None:
            return {}
        return self._core.metrics()

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
