"""AsyncShareConsumer: a share group member (KIP-932, Kafka's queues) on anyio
(asyncio or trio)."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import anyio
import anyio.abc

from kafkette.client import telemetry
from kafkette.client.client import check_connection_settings
from kafkette.client.config import ShareConsumerConfig
from kafkette.client.sync_bridge import documented_as
from kafkette.clocks import loop_clock_ms
from kafkette.consumer.share.core import ShareConsumerCore
from kafkette.consumer.share.record import (
    AcknowledgementCommitCallback,
    AcknowledgeType,
    ShareConsumerRecord,
)
from kafkette.consumer.timeouts import timeout_in_ms
from kafkette.errors import IllegalStateError
from kafkette.structs import TopicPartition


class AsyncShareConsumer:
    """Reads records as a member of the share group ``group.id``; use it as
    ``async with AsyncShareConsumer(...) as c``.

    Kafka's queues (KIP-932): the members of a share group read the same partitions
    together, each record is acquired by one member at a time (for the broker's
    ``group.share.record.lock.duration.ms``) and acknowledged: ACCEPT, RELEASE (delivered
    again, its ``delivery_count`` one more), REJECT, or RENEW (lock extended). With
    ``share.acknowledgement.mode`` ``implicit`` (the default) each poll accepts the
    previous poll's records; with ``explicit`` the application calls
    :meth:`acknowledge` for each record before polling again. Settings are Kafka's
    share consumer settings in either spelling.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **settings: Any) -> None:
        self.config = ShareConsumerConfig.from_user(config, **settings)
        check_connection_settings(self.config)
        self._core: ShareConsumerCore | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._callback: AcknowledgementCommitCallback | None = None

    # ---- lifecycle

    async def __aenter__(self) -> AsyncShareConsumer:
        if self._core is not None:
            raise IllegalStateError("the share consumer was already started")
        self._core = ShareConsumerCore(self.config, clock=loop_clock_ms())
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._core.run)
        self._task_group.start_soon(telemetry.run, self._core.client)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
        if self._task_group is not None:
            task_group, self._task_group = self._task_group, None
            await task_group.__aexit__(None, None, None)

    async def close(
        self,
        timeout_or_ms: float | None = None,
        /,
        *,
        timeout: float | None = None,
        timeout_ms: float | None = None,
    ) -> None:
        """Send the pending acknowledgements (implicit mode: accept the last poll's
        records), close the share sessions (the broker gives back any record still
        held), leave the group and close the connections, within ``timeout`` seconds or
        ``timeout_ms`` (default ``default.api.timeout.ms``); idempotent. The
        acknowledgement-commit callback hears of the last answers."""
        core = self._core
        if core is None or core.closed:
            return
        await core.close(timeout_in_ms(timeout_or_ms, timeout, timeout_ms))
        await self._run_callbacks()

    @property
    def _c(self) -> ShareConsumerCore:
        core = self._core
        if core is None:
            raise IllegalStateError(
                "use the share consumer as `async with AsyncShareConsumer(...) as c`"
            )
        core.check_open()
        return core

    # ---- subscription

    def subscribe(self, topics: Iterable[str] | str) -> None:
        """Join the share group ``group.id`` following ``topics`` (replacing the previous
        subscription; an empty list unsubscribes, as Java). The broker assigns the
        partitions; joining happens in the background and :meth:`poll` waits for it."""
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            raise ValueError("subscribe() needs topics; use unsubscribe() to stop")
        self._c.subscribe(names)

    def subscription(self) -> set[str]:
        """The subscribed topics."""
        return self._c.subscription()

    async def unsubscribe(self) -> None:
        """Send the pending acknowledgements, close the share sessions and leave the
        group (within ``default.api.timeout.ms``)."""
        await self._c.unsubscribe(None)
        await self._run_callbacks()

    # ---- records

    async def poll(
        self,
        timeout_or_ms: float | None = None,
        /,
        *,
        timeout: float | None = None,
        timeout_ms: float | None = None,
    ) -> list[ShareConsumerRecord]:
        """Records acquired for this member, each with its ``delivery_count``.

        First settles the previous poll's records: implicit mode accepts those not
        acknowledged; explicit mode raises :class:`~kafkette.errors.IllegalStateError`
        while any is unacknowledged. The acknowledgements go with this poll's fetch.
        Waits up to the timeout (default 0) for records: ``timeout`` in seconds or
        ``timeout_ms``; positionally an ``int`` is milliseconds and a ``float`` seconds.
        """
        core = self._c
        try:
            return await core.poll(timeout_in_ms(timeout_or_ms, timeout, timeout_ms) or 0)
        finally:
            await self._run_callbacks()

    def acknowledge(
        self, record: ShareConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT
    ) -> None:
        """Acknowledge ``record`` (explicit mode only): ACCEPT, RELEASE, REJECT or RENEW.

        The acknowledgement leaves with the next poll, commit or close. Raises
        :class:`~kafkette.errors.IllegalStateError` in implicit mode, and for a record
        this consumer does not hold (already acknowledged, or its session ended).
        """
        self._c.acknowledge(record, type)

    async def commit(
        self,
        timeout_or_ms: float | None = None,
        /,
        *,
        timeout: float | None = None,
        timeout_ms: float | None = None,
    ) -> dict[TopicPartition, Exception | None]:
        """Send the pending acknowledgements now and wait for the answers, within
        ``timeout`` seconds or ``timeout_ms`` (default ``default.api.timeout.ms``): per
        partition, None or the error the broker answered (Java's ``commitSync``)."""
        try:
            return await self._c.commit(timeout_in_ms(timeout_or_ms, timeout, timeout_ms))
        finally:
            await self._run_callbacks()

    def commit_async(self) -> None:
        """Start sending the pending acknowledgements and return; the
        acknowledgement-commit callback hears of the answers in a later poll."""
        core = self._c
        task_group = self._task_group
        assert task_group is not None
        core.commit_async(task_group.start_soon)

    def acquisition_lock_timeout_ms(self) -> int | None:
        """How long this member holds the records it acquires, as the broker last said
        (``group.share.record.lock.duration.ms`` or the group's override); None before
        any fetch (Java's ``acquisitionLockTimeoutMs``)."""
        return self._c.lock_timeout_ms

    @documented_as(telemetry.client_instance_id)
    async def client_instance_id(self, timeout: float | None = None) -> uuid.UUID:
        return await telemetry.client_instance_id(self._c.client, timeout)

    def set_acknowledgement_commit_callback(
        self, callback: AcknowledgementCommitCallback | None
    ) -> None:
        """``callback(offsets, error_or_None)`` is called for each partition's answered
        acknowledgements, in :meth:`poll`, :meth:`commit` or :meth:`close` (Java's
        ``setAcknowledgementCommitCallback``); it may be ``async``."""
        self._callback = callback

    async def _run_callbacks(self) -> None:
        core = self._core
        if core is None:
            return
        done = core.take_completed()
        callback = self._callback
        if callback is None:
            return
        for offsets, error in done:
            result = callback(offsets, error)
            if inspect.isawaitable(result):
                await result
