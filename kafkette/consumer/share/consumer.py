"""ShareConsumer: the synchronous share consumer, the async core run in a background
thread.

Each call crosses into the background event loop once (a poll, a commit), never per
record: :meth:`ShareConsumer.acknowledge` books in the calling thread, under the
acknowledgements' lock. The acknowledgement-commit callback runs in the thread that
polls, commits or closes, as in Java.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from kafkette.client import telemetry
from kafkette.client.config import ShareConsumerConfig
from kafkette.client.sync_bridge import BackgroundLoop, documented_as, run_plain, task_host
from kafkette.consumer.share.async_consumer import AsyncShareConsumer
from kafkette.consumer.share.core import ShareConsumerCore
from kafkette.consumer.share.record import (
    AcknowledgementCommitCallback,
    AcknowledgeType,
    ShareConsumerRecord,
)
from kafkette.consumer.timeouts import timeout_in_ms
from kafkette.structs import TopicPartition

T = TypeVar("T")


async def _build(config: ShareConsumerConfig) -> ShareConsumerCore:
    return ShareConsumerCore(config)


class ShareConsumer:
    """A share group member, blocking; see :class:`AsyncShareConsumer`.

    Not thread-safe (as Kafka's): use it from one thread at a time.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = ShareConsumerConfig.from_user(config, **settings)
        self._loop = BackgroundLoop("kafkette share consumer")
        try:
            self._core = self._loop.call(_build, self.config)
        except BaseException:
            self._loop.close()
            raise
        self._loop.call_soon(self._core.run)
        self._loop.call_soon(telemetry.run, self._core.client)
        _, self._tasks = self._loop.portal.start_task(task_host)
        self._callback: AcknowledgementCommitCallback | None = None

    def _call(self, func: Callable[..., T], *args: Any) -> T:
        self._core.check_open()
        result: T = self._loop.call(run_plain, func, *args)
        return result

    def _wait(self, func: Callable[..., Awaitable[T]], *args: Any) -> T:
        self._core.check_open()
        return self._loop.call(func, *args)

    # ---- lifecycle

    @documented_as(AsyncShareConsumer.close)
    def close(
        self,
        timeout_or_ms: float | None = None,
        /,
        *,
        timeout: float | None = None,
        timeout_ms: float | None = None,
    ) -> None:
        core = self._core
        try:
            if not core.closed:
                self._loop.call(core.close, timeout_in_ms(timeout_or_ms, timeout, timeout_ms))
                self._run_callbacks()
        finally:
            self._loop.close()

    def __enter__(self) -> ShareConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- subscription

    @documented_as(AsyncShareConsumer.subscribe)
    def subscribe(self, topics: Iterable[str] | str) -> None:
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            raise ValueError("subscribe() needs topics; use unsubscribe() to stop")
        self._call(self._core.subscribe, names)

    @documented_as(AsyncShareConsumer.subscription)
    def subscription(self) -> set[str]:
        return self._call(self._core.subscription)

    @documented_as(AsyncShareConsumer.unsubscribe)
    def unsubscribe(self) -> None:
        try:
            self._wait(self._core.unsubscribe, None)
        finally:
            self._run_callbacks()

    # ---- records

    @documented_as(AsyncShareConsumer.poll)
    def poll(
        self,
        timeout_or_ms: float | None = None,
        /,
        *,
        timeout: float | None = None,
        timeout_ms: float | None = None,
    ) -> list[ShareConsumerRecord]:
        wait = timeout_in_ms(timeout_or_ms, timeout, timeout_ms) or 0
        try:
            return self._wait(self._core.poll, wait)
        finally:
            self._run_callbacks()

    @documented_as(AsyncShareConsumer.acknowledge)
    def acknowledge(
        self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        self._core.acknowledge(record, type)

    @documented_as(AsyncShareConsumer.commit)
    def commit_sync(
        self,
        timeout_or_ms: float | None = None,
        /,
        *,
        timeout: float | None = None,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Exception | None]:
        wait = timeout_in_ms(timeout_or_ms, timeout, timeout_ms)
        try:
            return self._wait(self._core.commit, wait)
        finally:
            self._run_callbacks()

    @documented_as(AsyncShareConsumer.commit_async)
    def commit_async(self) -> None:
        self._call(self._core.commit_async, self._tasks.start_soon)

    @documented_as(AsyncShareConsumer.acquisition_lock_timeout_ms)
    def acquisition_lock_timeout_ms(self) -> int | None:
        self._core.check_open()
        return self._core.lock_timeout_ms

    @documented_as(AsyncShareConsumer.client_instance_id)
    def client_instance_id(self, timeout: float | None = None) -> uuid.UUID:
        return self._wait(telemetry.client_instance_id, self._core.client, timeout)

    def set_acknowledgement_commit_callback(
        self, callback: AcknowledgementCommitCallback | None
    ) -> None:
        """``callback(offsets, error_or_None)`` is called for each partition's answered
        acknowledgements, in the thread calling :meth:`poll`, :meth:`commit_sync` or
        :meth:`close` (Java's ``setAcknowledgementCommitCallback``)."""
        self._callback = callback

    def _run_callbacks(self) -> None:
        done = self._core.take_completed()
        if self._callback is not None:
            for offsets, error in done:
                self._callback(offsets, error)
