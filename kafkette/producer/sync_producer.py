"""Producer: the synchronous producer, the async core run in a background thread.

``send`` runs in the caller's thread and does not cross into the event loop
per record: it serializes, partitions and appends to the thread-safe
accumulator, which wakes the sender only when a batch fills up or a flush
starts; a batch opened, on Linux, sets a timer for the end of its linger instead
(:class:`~kafkette.client.linger_alarm.LingerAlarm`), which wakes it then.
Only the first record for a topic whose metadata is not known yet waits for the
loop. Delivery callbacks run in the background thread::

    with Producer(bootstrap_servers="localhost:9092") as producer:
        future = producer.send("events", b"value", key=b"key")
        metadata = future.result(timeout=10)

Transactions (with a ``transactional_id``): ``init_transactions()`` once, then
``begin_transaction()``, sends, ``send_offsets_to_transaction(...)`` and
``commit_transaction()`` or ``abort_transaction()``, as in Java.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from types import TracebackType
from typing import Any

from kafkette.client import telemetry
from kafkette.client.config import ProducerConfig
from kafkette.client.linger_alarm import LingerAlarm
from kafkette.client.sync_bridge import BackgroundLoop, documented_as
from kafkette.clocks import monotonic_ms
from kafkette.errors import BufferExhaustedError, IllegalStateError, KafkaTimeoutError
from kafkette.producer.accumulator import BufferFull
from kafkette.producer.core import HeadersArg, ProducerCore
from kafkette.producer.futures import DeliveryCallback, RecordFuture, RecordMetadata
from kafkette.producer.producer import AsyncProducer
from kafkette.producer.txn_runner import TransactionRunner
from kafkette.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition


def _thread_safe_caller() -> Callable[[Callable[[], None]], object]:
    """The cheapest way to run a plain function in the current event loop from another thread.

    The sender is woken about once per batch; the event loop's own thread-safe
    callback is much cheaper than starting a task through the portal. Called
    in the loop thread.
    """
    try:
        return asyncio.get_running_loop().call_soon_threadsafe
    except RuntimeError:  # trio, the other backend anyio runs on
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon


class Producer:
    """Sends records to Kafka from synchronous code (see :class:`ProducerConfig`)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = ProducerConfig.from_user(config, **settings)
        self._loop = BackgroundLoop("kafkette producer")
        try:
            self._core = self._loop.call(self._make_core)
        except BaseException:
            self._loop.close()
            alarm: LingerAlarm | None = getattr(self, "_alarm", None)
            if alarm is not None:
                alarm.close()
            raise
        sender = self._core.sender
        wake = sender.wakeup
        loop_thread = self._loop_thread
        call_soon = self._call_soon
        alarm = self._alarm

        def wakeup() -> None:
            if threading.get_ident() == loop_thread:
                wake()  # a send from a delivery callback, or close
            else:
                if alarm is not None:
                    alarm.cancel()  # the pass woken for looks at every batch
                call_soon(sender.nudge)

        self._core.accumulator.wakeup = wakeup
        if alarm is not None:
            self._core.accumulator.wake_at = alarm.at
        self._sender_done: Future[None] = self._loop.portal.start_task_soon(self._core.sender.run)
        self._loop.portal.start_task_soon(telemetry.run, self._core.client)

    async def _make_core(self) -> ProducerCore:
        self._loop_thread = threading.get_ident()
        self._call_soon = _thread_safe_caller()
        core = ProducerCore(self.config)
        sender = core.sender
        self._alarm = (
            LingerAlarm.open(sender.nudge, lambda: sender.may_defer_news)
            if core.accumulator.clock is monotonic_ms
            else None
        )
        return core

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> RecordFuture:
        """Queue a record; return its future (``future.result()`` gives the RecordMetadata).

        Blocks only while ``buffer.memory`` is full or the topic's metadata is
        unknown, each up to ``max.block.ms``. ``on_delivery(error, metadata)``
        runs in the producer's background thread.
        """
        core = self._core
        if core.closed:
            core.check_open()  # raises
        # The common record goes straight to the C append (a producer with serializers
        # or transactions once prepare_record did those steps); what it declines takes
        # the general path below.
        if core.sender.fatal_error is None:
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
            in_loop = threading.get_ident() == self._loop_thread
            if routed[0] is not None:
                count = 0
            elif in_loop:
                raise IllegalStateError(
                    f"cannot wait for the metadata of topic {topic!r} in the producer's own thread"
                )
            else:
                count = self._loop.call(core.wait_for_topic, topic, partition)
            chosen = core.admit(topic, routed, partition, count)
            if trace is not None:
                trace.partition = chosen
            _, key_b, value_b, headers_l, timestamp = routed
            if not in_loop:
                return core.accumulator.append(
                    topic, chosen, timestamp, key_b, value_b, headers_l, on_delivery
                )
            # a send from a delivery callback: waiting for room would block the very
            # thread that frees it
            try:
                return core.accumulator.append(
                    topic, chosen, timestamp, key_b, value_b, headers_l, on_delivery, block=False
                )
            except BufferFull:
                raise BufferExhaustedError(
                    "buffer.memory is full, and a send from a delivery callback cannot wait"
                ) from None
        except BaseException as exc:
            if trace is not None:
                trace.abandon(exc)
            raise

    @documented_as(AsyncProducer.send_and_wait)
    def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp: int | None = None,
        timeout: float | None = None,
    ) -> RecordMetadata:
        future = self.send(topic, value, key, headers, partition, timestamp)
        try:
            if future.done():
                return future.result()
            with self._core.flushing():  # its batch goes now, as for the async twin
                return future.result(timeout)
        except TimeoutError:  # the wait's (a delivery error is a KafkaError)
            raise KafkaTimeoutError(f"the record was not acknowledged within {timeout}s") from None

    @documented_as(AsyncProducer.flush)
    def flush(self, timeout: float | None = None) -> None:
        core = self._core
        with core.flushing() as results:
            deadline = None if timeout is None else core.clock() + timeout * 1000
            for result in results:
                remaining = None if deadline is None else max(deadline - core.clock(), 0) / 1000
                if not result.wait(remaining):
                    raise KafkaTimeoutError(f"flush did not complete within {timeout}s")

    # ---- transactions

    def _runner(self) -> TransactionRunner:
        return self._core.transaction_runner()

    def _timeout_s(self, timeout: float | None) -> float:
        return self._core.timeout_s(timeout)

    @documented_as(AsyncProducer.init_transactions)
    def init_transactions(self, timeout: float | None = None) -> None:
        runner = self._runner()
        self._loop.call(runner.init_transactions, self._timeout_s(timeout))

    @documented_as(AsyncProducer.begin_transaction)
    def begin_transaction(self) -> None:
        runner = self._runner()

        async def begin() -> None:
            runner.manager.begin_transaction()

        self._loop.call(begin)

    @documented_as(AsyncProducer.send_offsets_to_transaction)
    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: ConsumerGroupMetadata,
        timeout: float | None = None,
    ) -> None:
        runner = self._runner()
        self._loop.call(
            runner.send_offsets, dict(offsets), group_metadata, self._timeout_s(timeout)
        )

    @documented_as(AsyncProducer.commit_transaction)
    def commit_transaction(self, timeout: float | None = None) -> None:
        runner = self._runner()
        self._loop.call(runner.commit, self._timeout_s(timeout))

    @documented_as(AsyncProducer.abort_transaction)
    def abort_transaction(self, timeout: float | None = None) -> None:
        runner = self._runner()
        self._loop.call(runner.abort, self._timeout_s(timeout))

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is pending (up to ``timeout`` seconds), then stop the background thread.

        Records still undelivered after the timeout fail with
        :class:`KafkaTimeoutError`. An open transaction is aborted. Idempotent.
        """
        if not self._core.mark_closed():
            return
        try:
            self._loop.call(self._core.shutdown, timeout)
        finally:
            self._core.accumulator.wake_at = None
            self._loop.close()
            if self._alarm is not None:
                self._alarm.close()

    @documented_as(AsyncProducer.client_instance_id)
    def client_instance_id(self, timeout: float | None = None) -> uuid.UUID:
        self._core.check_open()
        return self._loop.call(telemetry.client_instance_id, self._core.client, timeout)

    @documented_as(AsyncProducer.metrics)
    def metrics(self) -> dict[str, float]:
        return self._core.metrics()

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
