"""The share consumer's machinery, shared by :class:`AsyncShareConsumer` and
:class:`ShareConsumer`; it runs in the event loop.

:class:`ShareConsumerCore` owns the client, the membership
(:class:`~kafkette.consumer.share.membership.ShareMembership`, heartbeated by
:meth:`ShareConsumerCore.run` at the broker's interval), the held records and booked
acknowledgements (:class:`~kafkette.consumer.share.acknowledgements.Acknowledgements`),
the records fetched ahead (:class:`~kafkette.consumer.share.fetch_buffer.ShareFetchBuffer`)
and one share session per partition leader, with its epoch (0 opens it, each answer
moves it on, -1 closes it).

Fetching in the background, as Java's ``ShareConsumer``: a poll hands out what the
fetch buffer holds; when it holds nothing, the poll asks :meth:`ShareConsumerCore.run`
to fetch (Java's ``fetchMoreRecords``), which sends each leader not already asked a
ShareFetch, waiting at the broker up to ``fetch.max.wait.ms`` (or what is left of the
poll's timeout) while a poll waits, and not at all once none does. Fetching stops when
an answer brings records, until a poll finds the buffer empty again: as in Java, the
member holds at most one answer per leader (the records the application had are
acknowledged by the fetch that brings the next ones), whatever the
application does meanwhile. An answer that comes after its poll gave up waits in the
buffer for the next poll, its records acquired, their locks running. Unlike Java's
fetcher, no ShareFetch long-polls in the background once no poll waits: a commit would
queue behind it (one request at a time per share session) for up to
``fetch.max.wait.ms``.

Each ShareFetch carries the acknowledgements booked for that leader's partitions before
the last poll (in implicit mode a poll accepts the previous poll's records first), so
they ride on the next fetch; when a poll hands out buffered records instead, they go in
a ShareAcknowledge at once (Java's asynchronous acknowledgement); ``commit`` sends
everything booked in ShareAcknowledge, after the request that is out. ``close`` and
``unsubscribe`` stop fetching, send what is booked with epoch -1, which closes the
session: the broker gives back what the member still holds, the records waiting in the
buffer among them (never handed out, so never acknowledged), then leave the group
(ShareGroupHeartbeat with epoch -1). Each answered acknowledgement is queued for the
acknowledgement-commit callback, which the consumer calls in the application's thread
or task.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

import anyio
import anyio.abc

from kafkette.client.client import KafkaClient
from kafkette.client.config import ShareConsumerConfig
from kafkette.client.telemetry import attach
from kafkette.clocks import MonotonicClockMs, monotonic_ms
from kafkette.consumer.fetch_buffer import timestamp_type
from kafkette.consumer.share.acknowledgements import AckBatch, Acknowledgements
from kafkette.consumer.share.fetch_buffer import Fetched, ShareFetchBuffer
from kafkette.consumer.share.membership import LEAVE_EPOCH, ShareMembership
from kafkette.consumer.share.metrics import ShareFetchMetrics
from kafkette.consumer.share.record import (
    AcknowledgementCommitCallback,
    AcknowledgeType,
    ShareConsumerRecord,
)
from kafkette.errors import (
    CorruptMessageError,
    IllegalStateError,
    InvalidShareSessionEpochError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RetriableError,
    ShareSessionNotFoundError,
    UnsupportedVersionError,
    make_error,
)
from kafkette.protocol.errors import ProtocolError
from kafkette.protocol.messages.share_acknowledge_request import (
    AcknowledgementBatch as AckRequestBatch,
)
from kafkette.protocol.messages.share_acknowledge_request import (
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from kafkette.protocol.messages.share_acknowledge_response import ShareAcknowledgeResponse
from kafkette.protocol.messages.share_fetch_request import (
    AcknowledgementBatch as FetchAckBatch,
)
from kafkette.protocol.messages.share_fetch_request import (
    FetchPartition,
    FetchTopic,
    ForgottenTopic,
    ShareFetchRequest,
)
from kafkette.protocol.messages.share_fetch_response import PartitionData, ShareFetchResponse
from kafkette.protocol.messages.share_group_heartbeat_response import ShareGroupHeartbeatResponse
from kafkette.protocol.records import RecordBatch, iter_batches
from kafkette.protocol.records.batch_header import NO_PARTITION_LEADER_EPOCH
from kafkette.structs import TopicPartition

logger = logging.getLogger("kafkette.consumer.share")

T = TypeVar("T")

_new = tuple.__new__  # a NamedTuple made without its Python-level __new__ (per record)

RENEW_SINCE = 2
"""ShareFetch and ShareAcknowledge carry RENEW from version 2 (KIP-1222)."""
_SESSION_LOST = {ShareSessionNotFoundError.code, InvalidShareSessionEpochError.code}

Completion = tuple[dict[TopicPartition, set[int]], Exception | None]
"""One call of the acknowledgement-commit callback: offsets and the outcome."""


def _next_epoch(epoch: int) -> int:
    return 1 if epoch == 2**31 - 1 else epoch + 1


class ShareConsumerCore:
    """State of one share consumer; create it inside the event loop."""

    def __init__(
        self, config: ShareConsumerConfig, *, clock: MonotonicClockMs = monotonic_ms
    ) -> None:
        assert config.group_id
        self.config = config
        self.group_id = config.group_id
        self.client = KafkaClient(config, clock=clock)
        self.membership = ShareMembership(self.group_id, rack_id=config.client_rack or None)
        self.acks = Acknowledgements()
        self.metrics = ShareFetchMetrics()
        attach(self.client, "consumer", self.metrics.samples)  # KIP-714 (enable.metrics.push)
        self.explicit = config.share_acknowledgement_mode == "explicit"
        self.sessions: dict[int, int] = {}
        """The next epoch of each leader's share session (absent: none open)."""
        self.session_partitions: dict[int, set[TopicPartition]] = {}
        self.callback: AcknowledgementCommitCallback | None = None
        self.completed: list[Completion] = []
        """Answered acknowledgements waiting for the callback."""
        self.closed = False
        self.buffer = ShareFetchBuffer()
        self._tasks: anyio.abc.TaskGroup | None = None
        self._plan: dict[int, set[TopicPartition]] | None = None
        """The leaders and their partitions the fetcher's last pass found (``_kick``);
        None once the assignment changed."""
        self._last_made: dict[TopicPartition, tuple[object, list[ShareConsumerRecord]]] = {}
        """The records of the last stored batch made per partition (see ``_made``)."""
        self.fetching = False
        """Whether records are fetched ahead: from the first poll until unsubscribe or
        close (Java's ``fetchMoreRecords``)."""
        self.wanted = False
        """A poll found nothing to hand out: fetch, until an answer brings records (Java's
        ``fetchMoreRecords``)."""
        self.poll_deadline: float | None = None
        """While a poll waits for records: when it gives up (client clock, ms)."""
        self.fetch_error: Exception | None = None
        """A partition's error from a fetch (TOPIC_AUTHORIZATION_FAILED, say): raised by
        the poll, or by the next one when this one has records of other partitions to
        hand out (records booked as delivered are always handed out)."""
        self.lock_timeout_ms: int | None = None
        """The acquisition lock duration the broker last gave (Java's
        ``acquisitionLockTimeoutMs``)."""
        self._node_locks: dict[int, anyio.Lock] = {}
        self._wake = anyio.Event()
        self._news = anyio.Event()
        self._fetch_wake = anyio.Event()
        self._stop = anyio.CancelScope()

    def check_open(self) -> None:
        if self.closed:
            raise IllegalStateError("the share consumer is closed")

    # ---- the background: heartbeat and fetching ahead

    async def run(self) -> None:
        """Heartbeat while subscribed, at the broker's interval, and fetch for the polls,
        until closed."""
        with self._stop:
            async with anyio.create_task_group() as tasks:
                self._tasks = tasks
                tasks.start_soon(self._heartbeat_loop)
                await self._fetch_loop(tasks)

    async def _heartbeat_loop(self) -> None:
        while not self.closed:
            membership = self.membership
            if membership.due(self.client.clock()):
                await self._heartbeat()
            wait_s = None
            if membership.subscribed and membership.error is None:
                wait_s = max(membership.next_ms - self.client.clock(), 0) / 1000
            with anyio.move_on_after(wait_s if wait_s is not None else float("inf")):
                await self._wake.wait()
            if self._wake.is_set():
                self._wake = anyio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def _heartbeat(self) -> None:
        membership = self.membership
        request = membership.request()
        backoff = self.config.retry_backoff_ms
        try:
            response = await self.client.send_to_coordinator(self.group_id, request)
        except (KafkaConnectionError, KafkaTimeoutError, RetriableError) as exc:
            logger.debug("share group %s heartbeat: %s; retrying", self.group_id, exc)
            self.client.invalidate_coordinator(self.group_id)
            membership.next_ms = self.client.clock() + backoff
            return
        except KafkaError as exc:
            membership.error = exc
            self._tell_poll()
            return
        if not membership.subscribed:  # unsubscribed meanwhile: the answer is stale
            return
        assert isinstance(response, ShareGroupHeartbeatResponse)
        assignment = membership.assignment
        if membership.on_answer(request, response, self.client.clock()):
            self.client.invalidate_coordinator(self.group_id)
            membership.next_ms = self.client.clock() + backoff
        if membership.assignment != assignment:
            self._plan = None  # the fetcher's next pass looks again
        self._tell_poll()

    def _tell_poll(self) -> None:
        """Something a waiting poll and the fetcher look at changed (an answer, an
        assignment, an error)."""
        self._news.set()
        self._news = anyio.Event()
        self._fetch_wake.set()

    def wake_fetcher(self) -> None:
        self._fetch_wake.set()

    async def _fetch_loop(self, tasks: anyio.abc.TaskGroup) -> None:
        """Start a ShareFetch to each leader that may have one (see the module
        docstring), whenever something changed."""
        while not self.closed:
            self._fetch_wake = anyio.Event()
            wait_s = float("inf")
            if self.fetching and self.membership.subscribed:
                try:
                    await self._start_fetches(tasks)
                except KafkaError as exc:  # no metadata yet, say: try again after the backoff
                    logger.debug("share group %s: cannot fetch yet: %s", self.group_id, exc)
                    wait_s = self.config.retry_backoff_ms / 1000
            with anyio.move_on_after(wait_s):
                await self._fetch_wake.wait()

    async def _start_fetches(self, tasks: anyio.abc.TaskGroup) -> None:
        by_node = await self._by_leader(await self.assigned())
        for tp in self.acks.waiting(sealed_only=True):
            node = self._session_node(tp)
            if node is not None:
                by_node.setdefault(node, set())  # acknowledgements of a partition left
        for node in self.session_partitions:
            by_node.setdefault(node, set())  # to forget what it no longer reads
        self._plan = {node: set(partitions) for node, partitions in by_node.items()}
        sealed = {self._session_node(tp) for tp in self.acks.waiting(sealed_only=True)}
        for node, partitions in by_node.items():
            if not self.fetching or self.buffer.busy(node):
                continue
            if self.wanted:
                self._launch(tasks, node, partitions)
            elif node in sealed:  # a poll handed out buffered records: send the last ones'
                self.buffer.in_flight.add(node)
                tasks.start_soon(self._acknowledge_ahead, node)

    def _launch(
        self, tasks: anyio.abc.TaskGroup, node: int, partitions: set[TopicPartition]
    ) -> None:
        """Start a ShareFetch to ``node``: waiting at the broker while a poll waits, not
        at all once none does."""
        wait_ms = 0.0
        deadline = self.poll_deadline
        if deadline is not None:
            wait_ms = min(max(deadline - self.client.clock(), 0), self.config.fetch_max_wait_ms)
        self.buffer.in_flight.add(node)
        tasks.start_soon(self._fetch_ahead, node, partitions, int(wait_ms))

    def _kick(self) -> None:
        """From a poll: fetch at once from the leaders the fetcher last read from, without
        waiting for its next pass (which looks the assignment and leaders up again)."""
        tasks, plan = self._tasks, self._plan
        if tasks is None or plan is None or not self.fetching:
            return
        for node, partitions in plan.items():
            if partitions and not self.buffer.busy(node):
                self._launch(tasks, node, partitions)

    async def _fetch_ahead(self, node: int, partitions: set[TopicPartition], wait_ms: int) -> None:
        """One ShareFetch to ``node``; its records wait in the buffer for a poll."""
        sent = False
        try:
            fetched = await self._fetch_node(node, partitions, wait_ms)
            if fetched is not None:
                sent = True
                self.buffer.add(fetched)
                if fetched.records or self.poll_deadline is None:
                    self.wanted = False  # the next poll finding nothing asks again
                if node not in self.sessions:  # the session or connection was lost
                    await anyio.sleep(self.config.retry_backoff_ms / 1000)
        except Exception as exc:  # for the next poll to raise
            sent = True
            if self.fetch_error is None:
                self.fetch_error = exc
            await anyio.sleep(self.config.retry_backoff_ms / 1000)
        finally:
            self.buffer.in_flight.discard(node)
        if sent:  # else nothing was to send: fetch again when something changes
            self._tell_poll()

    async def _acknowledge_ahead(self, node: int) -> None:
        """A ShareAcknowledge of what was booked before the last poll for ``node``'s
        partitions, when no fetch takes it (Java's ShareAcknowledgeAsyncEvent)."""
        try:
            async with self._lock(node):
                partitions = self.session_partitions.get(node, set())
                acks = self.acks.take(partitions, sealed_only=True)
                if acks and node in self.sessions:
                    await self._send_acknowledge(node, acks, closing=False)
                elif acks:
                    self._fail(acks, ShareSessionNotFoundError(f"no share session with {node}"))
        except Exception as exc:  # for the next poll to raise
            if self.fetch_error is None:
                self.fetch_error = exc
        finally:
            self.buffer.in_flight.discard(node)

    async def _leave(self) -> None:
        membership = self.membership
        if membership.epoch == 0 and not membership.subscribed:
            return
        request = membership.leave_request()
        membership.unsubscribe()
        try:
            await self.client.send_to_coordinator(self.group_id, request)
        except KafkaError as exc:  # the broker ends the member's session on its own
            logger.debug("share group %s: leaving failed: %s", self.group_id, exc)

    # ---- subscription

    def subscribe(self, topics: Iterable[str]) -> None:
        self.check_open()
        names = list(topics)
        for name in names:
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"topic names must be non-empty strings, got {name!r}")
        self.membership.subscribe(names)
        self.client.metadata.wanted_topics.update(names)
        self.wake()

    def subscription(self) -> set[str]:
        return set(self.membership.topics)

    async def unsubscribe(self, timeout_ms: float | None) -> None:
        """Send what is booked, close the share sessions and leave the group."""
        self.check_open()
        await self.within("unsubscribe()", self.timeout(timeout_ms), self._close_sessions_and_leave)

    async def _close_sessions_and_leave(self) -> None:
        self.fetching = False  # a fetch out is answered first: its node's lock is held
        if not self.explicit:
            self.acks.accept_unacknowledged()
        await self._acknowledge_all(closing=True)
        self.buffer.drop()  # never handed out: the closed sessions gave them back
        self._last_made.clear()
        await self._leave()

    # ---- assignment

    async def assigned(self) -> list[TopicPartition]:
        """The assigned partitions by name (metadata looked up for unknown topic ids)."""
        assignment = self.membership.assignment
        names = self._names()
        if any(topic_id not in names for topic_id in assignment):
            await self.client.refresh_metadata(self.client.metadata.wanted_topics)
            names = self._names()
        return [
            TopicPartition(names[topic_id], index)
            for topic_id, indexes in assignment.items()
            if topic_id in names
            for index in indexes
        ]

    def _names(self) -> dict[uuid.UUID, str]:
        return {info.topic_id: name for name, info in self.client.metadata.snapshot.topics.items()}

    def _ids(self) -> dict[str, uuid.UUID]:
        return {name: info.topic_id for name, info in self.client.metadata.snapshot.topics.items()}

    async def _by_leader(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[int, set[TopicPartition]]:
        out: dict[int, set[TopicPartition]] = {}
        for tp in partitions:
            try:
                node = await self.client.leader(tp.topic, tp.partition)
            except KafkaError as exc:
                logger.debug("no leader for %s yet: %s", tp, exc)
                continue
            out.setdefault(node, set()).add(tp)
        return out

    # ---- poll

    async def poll(self, timeout_ms: float) -> list[ShareConsumerRecord]:
        """The records of one poll, waiting up to ``timeout_ms`` for some."""
        self.check_open()
        if self.membership.error is not None:
            raise self.membership.error
        if not self.membership.subscribed:
            raise IllegalStateError("Consumer is not subscribed to any topics.")
        if self.explicit:
            if not self.acks.all_acknowledged():
                raise IllegalStateError(
                    "All records must be acknowledged in explicit acknowledgement mode."
                )
        else:
            self.acks.accept_unacknowledged()
        self.acks.seal()  # for the next fetch to each leader
        self._raise_fetch_error()
        clock = self.client.clock
        deadline = clock() + timeout_ms
        self.fetching = True
        while True:
            if self.membership.error is not None:
                raise self.membership.error
            records = self._hand_out(self.buffer.take())
            if records:
                self.wake_fetcher()  # the acknowledgements booked before, when no fetch is due
                return records
            self._raise_fetch_error()
            self.wanted = True  # nothing to hand out: fetch (carrying what is booked)
            left = deadline - clock()
            if left > 0:
                self.poll_deadline = deadline  # the fetch waits at the broker meanwhile
            self._kick()
            self.wake_fetcher()
            if left <= 0:
                return []
            news = self._news
            try:
                with anyio.move_on_after(left / 1000):
                    await news.wait()
            finally:
                self.poll_deadline = None

    def _hand_out(self, taken: list[Fetched]) -> list[ShareConsumerRecord]:
        """The records of answers taken from the buffer, booked as delivered."""
        out: list[ShareConsumerRecord] = []
        for fetched in taken:
            for tp, (offsets, gaps) in fetched.offsets.items():
                self.acks.delivered(tp, itertools.chain.from_iterable(offsets), gaps)
            out += fetched.records
        self.metrics.records_consumed += len(out)
        return out

    def _raise_fetch_error(self) -> None:
        error, self.fetch_error = self.fetch_error, None
        if error is not None:
            raise error

    def _session_node(self, tp: TopicPartition) -> int | None:
        for node, partitions in self.session_partitions.items():
            if tp in partitions:
                return node
        return None

    def _lock(self, node: int) -> anyio.Lock:
        return self._node_locks.setdefault(node, anyio.Lock())

    async def _fetch_node(
        self, node: int, partitions: set[TopicPartition], max_wait_ms: int
    ) -> Fetched | None:
        """One ShareFetch to ``node``: its answer (empty when the session was lost), or
        None when nothing was to be sent."""
        async with self._lock(node):
            if not self.fetching:  # unsubscribed or closing meanwhile
                return None
            epoch = self.sessions.get(node, 0)
            previous = self.session_partitions.get(node, set())
            acks = self.acks.take(previous, sealed_only=True) if epoch else {}
            if not partitions and not acks:
                if previous and epoch:  # nothing left to read there: close the session
                    await self._send_acknowledge(node, {}, closing=True)
                return None
            ids = self._ids()
            topics: dict[str, dict[int, FetchPartition]] = {}
            for tp in partitions | set(acks):
                topics.setdefault(tp.topic, {})[tp.partition] = FetchPartition(
                    partition_index=tp.partition,
                    acknowledgement_batches=[FetchAckBatch(*batch) for batch in acks.get(tp, [])],
                )
            forgotten: dict[str, list[int]] = {}
            for tp in previous - partitions:
                forgotten.setdefault(tp.topic, []).append(tp.partition)
            request = ShareFetchRequest(
                group_id=self.group_id,
                member_id=self.membership.member_id,
                share_session_epoch=epoch,
                max_wait_ms=max_wait_ms,
                min_bytes=self.config.fetch_min_bytes,
                max_bytes=self.config.fetch_max_bytes,
                max_records=self.config.max_poll_records,
                batch_size=self.config.max_poll_records,
                topics=[
                    FetchTopic(topic_id=ids[name], partitions=list(parts.values()))
                    for name, parts in topics.items()
                    if name in ids
                ],
                forgotten_topics_data=[
                    ForgottenTopic(topic_id=ids[name], partitions=parts)
                    for name, parts in forgotten.items()
                    if name in ids
                ],
            )
            response = await self._exchange(node, request, acks)
            if response is None:
                return Fetched(node, [], {})
            assert isinstance(response, ShareFetchResponse)
            self.sessions[node] = _next_epoch(epoch)
            self.session_partitions[node] = set(partitions)
            return self._read_fetch(node, response, acks)

    async def _exchange(
        self,
        node: int,
        request: ShareFetchRequest | ShareAcknowledgeRequest,
        acks: dict[TopicPartition, list[AckBatch]],
    ) -> ShareFetchResponse | ShareAcknowledgeResponse | None:
        """Send a ShareFetch or ShareAcknowledge to ``node``; None (and the session
        forgotten, its acknowledgements failed) when the session or connection is lost."""
        try:
            connection = await self.client.connection(node)
            version = connection.version_for(request)
            if version < RENEW_SINCE and _has_renew(acks):
                raise UnsupportedVersionError(
                    f"acknowledge type RENEW needs {request.NAME[:-7]} v{RENEW_SINCE}; "
                    f"the broker serves v{version}"
                )
            if version >= RENEW_SINCE:
                request.is_renew_ack = _has_renew(acks)
            self.metrics.acknowledgements_sent += sum(
                last - first + 1 for batches in acks.values() for first, last, _ in batches
            )
            sent_ms = self.client.clock()
            response = await connection.request(request, version=version)
            assert isinstance(response, (ShareFetchResponse, ShareAcknowledgeResponse))
            if isinstance(response, ShareFetchResponse):
                self.metrics.fetched(
                    self.client.clock() - sent_ms,
                    sum(len(p.records or b"") for t in response.responses for p in t.partitions),
                )
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            self.client.metadata.request_update()
            self._lose_session(node, acks, exc)
            return None
        code = response.error_code
        if response.acquisition_lock_timeout_ms > 0:
            self.lock_timeout_ms = response.acquisition_lock_timeout_ms
        if code in _SESSION_LOST:
            self._lose_session(node, acks, make_error(code, response.error_message))
            return None
        if code:
            error = make_error(code, response.error_message)
            self._fail(acks, error)
            raise error
        return response

    def _lose_session(
        self, node: int, acks: dict[TopicPartition, list[AckBatch]], error: Exception
    ) -> None:
        """The broker gave back what the session held: forget it and fail its acks."""
        logger.debug("share session with node %d lost: %s", node, error)
        self.sessions.pop(node, None)
        lost = self.session_partitions.pop(node, set())
        self.acks.forget(lost)
        self.buffer.drop({node})
        self._fail(acks, error)

    def _fail(self, acks: dict[TopicPartition, list[AckBatch]], error: Exception) -> None:
        for tp, batches in acks.items():
            self._complete(tp, batches, error)

    def _complete(
        self, tp: TopicPartition, batches: list[AckBatch], error: Exception | None
    ) -> None:
        offsets = {
            offset
            for first, last, types in batches
            for offset, kind in zip(
                range(first, last + 1),
                types if len(types) > 1 else types * (last - first + 1),
                strict=True,
            )
            if kind
        }
        if offsets:
            self.completed.append(({tp: offsets}, error))
            if error is not None:
                self.metrics.acknowledgements_failed += len(offsets)

    def _read_fetch(
        self, node: int, response: ShareFetchResponse, acks: dict[TopicPartition, list[AckBatch]]
    ) -> Fetched:
        names = self._names()
        out = Fetched(node, [], {})
        for topic in response.responses:
            name = names.get(topic.topic_id)
            if name is None:
                continue
            for part in topic.partitions:
                tp = TopicPartition(name, part.partition_index)
                if tp in acks:
                    code = part.acknowledge_error_code
                    error = make_error(code, part.acknowledge_error_message) if code else None
                    self._complete(tp, acks.pop(tp), error)
                if part.error_code:
                    error = make_error(part.error_code, part.error_message)
                    if isinstance(error, RetriableError):
                        self.client.metadata.request_update()
                    elif self.fetch_error is None:
                        self.fetch_error = error
                    continue
                try:
                    self._records(tp, part, out)
                except CorruptMessageError as exc:  # its records come back after their locks
                    if self.fetch_error is None:
                        self.fetch_error = exc
        for tp, batches in acks.items():  # not answered: as if lost
            self._complete(tp, batches, ShareSessionNotFoundError(f"no answer for {tp}"))
        return out

    def _made(
        self,
        tp: TopicPartition,
        batch: RecordBatch,
        prefix: tuple[str, int],
        suffix: tuple[int, int | None, int],
    ) -> list[ShareConsumerRecord] | None:
        """The records of a whole stored batch, made by the C extension (None without it).

        A stored batch larger than what one fetch acquires (the broker keeps at most
        ``group.share.partition.max.record.locks`` records in flight, 2000 by default)
        comes again with the next answers, whole: the last one made per partition is
        kept, so that each is made once, not once per answer."""
        header = batch.header
        key = (header.base_offset, header.crc, header.batch_length, suffix)
        known = self._last_made.get(tp)
        if known is not None and known[0] == key:
            return known[1]
        made = batch.records_as(ShareConsumerRecord, prefix, suffix)
        if made is not None:
            self._last_made[tp] = (key, made)
        return made

    def _records(self, tp: TopicPartition, part: PartitionData, into: Fetched) -> None:
        """The acquired records of one partition's answer, and its gaps, into ``into``.

        The broker sends whole stored batches, often holding far more records than
        were acquired: only the acquired ranges' slices of each batch become records."""
        if not part.acquired_records:
            return
        ranges = sorted(
            (a.first_offset, a.last_offset, a.delivery_count) for a in part.acquired_records
        )
        kd, vd = self.config.key_deserializer, self.config.value_deserializer
        plain = kd is None and vd is None
        prefix = (tp.topic, tp.partition)
        out = into.records
        seen: list[Sequence[int]] = []  # the offsets of the records made, a range per run
        try:
            for batch in iter_batches(
                part.records or b"", allow_partial=True, check_crc=self.config.check_crcs
            ):
                if isinstance(batch, RecordBatch):
                    header = batch.header
                    if header.is_control:
                        continue
                    low, high = header.base_offset, header.last_offset
                    epoch = header.partition_leader_epoch
                    leader_epoch = None if epoch == NO_PARTITION_LEADER_EPOCH else epoch
                else:
                    low, high = 0, batch.next_offset - 1
                    leader_epoch = None
                wanted = [r for r in ranges if r[0] <= high and r[1] >= low]
                if not wanted:
                    continue
                suffix = (timestamp_type(batch), leader_epoch)
                if plain and len(wanted) == 1 and isinstance(batch, RecordBatch):
                    first, last, count = wanted[0]
                    made = self._made(tp, batch, prefix, (*suffix, count))
                    if made is not None:
                        if first > low or last < high:
                            made = _within(made, first, last)
                        if made:
                            out += made
                            seen.append(_offsets(made, 2))
                        continue
                records = list(batch)
                for first, last, count in wanted:
                    i = bisect.bisect_left(records, first, key=_offset)
                    j = bisect.bisect_right(records, last, key=_offset)
                    chunk = records[i:j]
                    if not chunk:
                        continue
                    seen.append(_offsets(chunk, 0))
                    tail = (*suffix, count)
                    if plain:
                        out += [_new(ShareConsumerRecord, prefix + r + tail) for r in chunk]
                        continue
                    for offset, timestamp, key, value, headers in chunk:
                        if kd is not None and key is not None:
                            key = kd(key)
                        if vd is not None and value is not None:
                            value = vd(value)
                        out.append(
                            _new(
                                ShareConsumerRecord,
                                (*prefix, offset, timestamp, key, value, headers, *tail),
                            )
                        )
        except ProtocolError as exc:
            raise CorruptMessageError(f"{tp}: {exc}") from exc
        acquired = sum(last - first + 1 for first, last, _ in ranges)
        if sum(len(offsets) for offsets in seen) == acquired:  # no gaps
            into.offsets[tp] = (seen, [])
            return
        found = set(itertools.chain.from_iterable(seen))
        gaps = [
            offset
            for first, last, _ in ranges
            for offset in range(first, last + 1)
            if offset not in found
        ]
        into.offsets[tp] = (seen, gaps)

    # ---- acknowledgements

    def acknowledge(self, record: ShareConsumerRecord, kind: AcknowledgeType) -> None:
        self.check_open()
        if not self.explicit:
            raise IllegalStateError("Implicit acknowledgement of delivery is being used.")
        self.acks.acknowledge(TopicPartition(record.topic, record.partition), record.offset, kind)

    async def commit(self, timeout_ms: float | None) -> dict[TopicPartition, Exception | None]:
        """Send the booked acknowledgements now (ShareAcknowledge) and wait for the
        answers: per partition, None or the error it answered."""
        self.check_open()
        if not self.explicit:
            self.acks.accept_unacknowledged()
        return await self.within(
            "commit_sync()", self.timeout(timeout_ms), lambda: self._acknowledge_all(closing=False)
        )

    async def _acknowledge_all(self, *, closing: bool) -> dict[TopicPartition, Exception | None]:
        nodes: dict[int, set[TopicPartition]] = {}
        for tp in self.acks.waiting():
            node = self._session_node(tp)
            if node is None:  # its session is gone: the broker gave the records back
                error = ShareSessionNotFoundError(f"no share session holds {tp}")
                self._complete(tp, self.acks.take([tp])[tp], error)
                continue
            nodes.setdefault(node, set()).add(tp)
        if closing:
            for node in self.sessions:
                nodes.setdefault(node, set())
        results: dict[TopicPartition, Exception | None] = {}

        async def one(node: int, partitions: set[TopicPartition]) -> None:
            async with self._lock(node):
                if node not in self.sessions:
                    return
                acks = self.acks.take(partitions)
                if not acks and not closing:
                    return
                before = len(self.completed)
                await self._send_acknowledge(node, acks, closing=closing)
                for offsets, error in self.completed[before:]:
                    for tp in offsets:
                        results[tp] = error

        async with anyio.create_task_group() as tasks:
            for node, partitions in nodes.items():
                tasks.start_soon(one, node, partitions)
        return results

    async def _send_acknowledge(
        self, node: int, acks: dict[TopicPartition, list[AckBatch]], *, closing: bool
    ) -> None:
        epoch = self.sessions.get(node)
        if epoch is None:
            self._fail(acks, ShareSessionNotFoundError(f"no share session with node {node}"))
            return
        ids = self._ids()
        topics: dict[str, list[AcknowledgePartition]] = {}
        for tp, batches in acks.items():
            topics.setdefault(tp.topic, []).append(
                AcknowledgePartition(
                    partition_index=tp.partition,
                    acknowledgement_batches=[AckRequestBatch(*batch) for batch in batches],
                )
            )
        request = ShareAcknowledgeRequest(
            group_id=self.group_id,
            member_id=self.membership.member_id,
            share_session_epoch=LEAVE_EPOCH if closing else epoch,
            topics=[
                AcknowledgeTopic(topic_id=ids[name], partitions=parts)
                for name, parts in topics.items()
            ],
        )
        response = await self._exchange(node, request, acks)
        if closing:
            self.sessions.pop(node, None)
            self.acks.forget(self.session_partitions.pop(node, set()))
            self.buffer.drop({node})
        if response is None:
            return
        assert isinstance(response, ShareAcknowledgeResponse)
        if not closing:
            self.sessions[node] = _next_epoch(epoch)
        names = self._names()
        for topic in response.responses:
            name = names.get(topic.topic_id)
            for part in topic.partitions:
                tp = TopicPartition(name or "", part.partition_index)
                if tp in acks:
                    code = part.error_code
                    error = make_error(code, part.error_message) if code else None
                    self._complete(tp, acks.pop(tp), error)
        self._fail(acks, ShareSessionNotFoundError("the broker did not answer for them"))

    def commit_async(
        self, start: Callable[[Callable[[], Coroutine[Any, Any, None]]], object]
    ) -> None:
        """Start sending the booked acknowledgements; the callback hears of the answers
        in a later poll."""
        self.check_open()
        if not self.explicit:
            self.acks.accept_unacknowledged()

        async def send() -> None:
            try:
                await self._acknowledge_all(closing=False)
            except KafkaError as exc:
                logger.debug("commit_async of share group %s: %s", self.group_id, exc)

        start(send)

    def take_completed(self) -> list[Completion]:
        done, self.completed = self.completed, []
        return done

    # ---- lifecycle

    def timeout(self, timeout_ms: float | None) -> float:
        return float(self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms)

    async def within(
        self, what: str, timeout_ms: float, operation: Callable[[], Awaitable[T]]
    ) -> T:
        with anyio.move_on_after(max(timeout_ms, 0.0) / 1000):
            return await operation()
        cause = self.client.last_connection_error
        detail = f" (last connection error: {cause})" if cause is not None else ""
        raise KafkaTimeoutError(f"{what} did not complete within {timeout_ms:g} ms{detail}")

    async def close(self, timeout_ms: float | None) -> None:
        """Send what is booked with epoch -1 (closing each share session), leave the
        group, close the connections; idempotent."""
        if self.closed:
            return
        try:
            with anyio.move_on_after(max(self.timeout(timeout_ms), 0.0) / 1000, shield=True):
                try:
                    await self._close_sessions_and_leave()
                except KafkaError as exc:
                    logger.debug("closing share consumer of %s: %s", self.group_id, exc)
        finally:
            self.closed = True
            self._stop.cancel()
            self._tell_poll()
            with anyio.CancelScope(shield=True):
                await self.client.close()


def _offset(record: tuple[Any, ...]) -> int:
    return int(record[0])


def _within(made: list[ShareConsumerRecord], first: int, last: int) -> list[ShareConsumerRecord]:
    """The records of ``made`` (ascending offsets) from ``first`` to ``last``."""
    base = made[0].offset
    if made[-1].offset - base + 1 == len(made):  # contiguous: a slice
        return made[max(first - base, 0) : max(last - base + 1, 0)]
    return [r for r in made if first <= r.offset <= last]


def _offsets(records: Sequence[tuple[Any, ...]], field: int) -> Sequence[int]:
    """The offsets of ``records`` (ascending, offset at ``field``): a range when they
    are contiguous, as they are unless compaction removed some."""
    first, last = records[0][field], records[-1][field]
    if last - first + 1 == len(records):
        return range(first, last + 1)
    return [r[field] for r in records]


def _has_renew(acks: dict[TopicPartition, list[AckBatch]]) -> bool:
    return any(
        AcknowledgeType.RENEW in types for batches in acks.values() for _, _, types in batches
    )
