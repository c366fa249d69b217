"""AsyncProducer: the producer on anyio (asyncio or trio).

Use it as an async context manager, which starts the sender and, on exit,
delivers what is pending (``close``)::

    async with AsyncProducer(bootstrap_servers="localhost:9092") as producer:
        future = await producer.send("events", b"value", key=b"key")
        metadata = await future          # RecordMetadata(topic, partition, offset, timestamp)

``await producer.start()`` / ``await producer.close()`` work too, from the
same task. ``send`` awaits only when it must: for the metadata of a topic it
has not seen yet, or for room in ``buffer.memory``; the returned future
resolves when the broker acknowledges the record. So a task sending in a
tight loop does not let the sender run until it awaits something (a future,
``flush``, or a full buffer): that is the fastest way to produce, but await
now and then if delivery latency matters.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any

import anyio
import anyio.abc

from kafkette.client.config import ProducerConfig
from kafkette.errors import BufferExhaustedError, IllegalStateError, KafkaTimeoutError
from kafkette.producer.accumulator import BufferFull
from kafkette.producer.core import HeadersArg, ProducerCore
from kafkette.producer.futures import DeliveryCallback, RecordFuture, RecordMetadata


class AsyncProducer:
    """Sends records to Kafka; configured with Kafka's settings (see :class:`ProducerConfig`)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = ProducerConfig.from_user(config, **settings)
        self._core: ProducerCore | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._space: anyio.Event | None = None
        self._closed = False

    async def start(self) -> None:
        """Start the sender task (no connection is opened until the first record)."""
        if self._core is not None:
            raise IllegalStateError("the producer was already started")
        core = self._core = ProducerCore(self.config)
        core.accumulator.wakeup = core.sender.wakeup
        core.accumulator.on_space = self._space_freed
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(core.sender.run)

    def _space_freed(self) -> None:
        if self._space is not None:
            self._space.set()

    def _running(self) -> ProducerCore:
        if self._closed:
            raise IllegalStateError("the producer is closed")
        if self._core is None:
            raise IllegalStateError("the producer is not started: use 'async with' or start()")
        return self._core

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
        core = self._running()
        if core.sender.fatal_error is not None:
            raise core.sender.fatal_error
        chosen, key_b, value_b, headers_l, timestamp = core.route(
            topic, value, key, headers, partition, timestamp
        )
        if chosen is None:
            count = await core.wait_for_topic(topic, partition)
            chosen = core.choose_partition(topic, key_b, value_b, headers_l, partition, count)
        try:
            return core.accumulator.append(
                topic, chosen, timestamp, key_b, value_b, headers_l, on_delivery, block=False
            )
        except BufferFull:
            pass
        deadline = core.clock() + self.config.max_block_ms
        while True:
            self._space = anyio.Event()
            try:
                return core.accumulator.append(
                    topic, chosen, timestamp, key_b, value_b, headers_l, on_delivery, block=False
                )
            except BufferFull as full:
                remaining = deadline - core.clock()
                if remaining <= 0:
                    raise BufferExhaustedError(
                        f"{core.accumulator.buffer_used} of buffer.memory="
                        f"{self.config.buffer_memory} bytes stayed in use for "
                        f"max.block.ms={self.config.max_block_ms}; {full.size} more were needed"
                    ) from None
                with anyio.move_on_after(remaining / 1000):
                    await self._space.wait()

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its acknowledgement."""
        future = await self.send(topic, value, key, headers, partition, timestamp)
        return await future

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until it is acknowledged or failed.

        Raises :class:`KafkaTimeoutError` if that takes longer than ``timeout`` seconds.
        """
        core = self._running()
        results = core.accumulator.begin_flush()
        try:
            with anyio.move_on_after(timeout) as scope:
                for result in results:
                    await result.wait_async()
            if scope.cancelled_caught:
                raise KafkaTimeoutError(f"flush did not complete within {timeout}s")
        finally:
            core.accumulator.end_flush()

    async def close(self, timeout: float | None = None) -> None:
        """Deliver what is pending (up to ``timeout`` seconds), then stop.

        Records still undelivered after the timeout fail with
        :class:`KafkaTimeoutError`. Idempotent.
        """
        if self._closed or self._core is None:
            self._closed = True
            return
        core = self._core
        self._closed = True
        core.accumulator.close()
        core.sender.stop()
        assert self._task_group is not None
        try:
            with anyio.move_on_after(timeout) as scope:
                await core.sender.finished.wait()
            if scope.cancelled_caught:
                core.sender.abort(
                    KafkaTimeoutError(
                        f"the producer was closed after {timeout}s with records undelivered"
                    )
                )
        finally:
            await self._task_group.__aexit__(None, None, None)
            with anyio.CancelScope(shield=True):
                await core.client.close()

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
