"""The fetcher: FetchRequests to partition leaders, results into the :class:`FetchBuffer`.

It runs as one task in the consumer's event loop. Each round it resolves
positions that need a reset (ListOffsets), refreshes metadata when a leader
is unknown or moved, groups the fetchable partitions by leader, and sends one
FetchRequest to each leader that has none outstanding (so at most one fetch
per broker is in flight). Requests are session-less (session id 0, epoch -1).

Partitions are fetched ahead: a partition whose previous records are still
buffered is fetched again from the end of those records (up to two completed
fetches per partition waiting besides the one ``poll`` reads), so while the
application works on one batch of records, the next is already on its way or
waiting. The next fetch from a broker is sent as soon as its answer is
buffered, in the same step, not in a later round: the broker reads while
``poll`` parses. One exception: a ``poll`` waiting for records gets a small
answer (:data:`HAND_OVER_FIRST_BYTES`) first, before that FetchRequest is
written: one loop turn for an async ``poll`` task, and for a sync ``poll``
thread, the loop thread waits until it has run.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

import anyio
import anyio.lowlevel

from kafkette.client.backoff import backoff_ms
from kafkette.client.client import KafkaClient
from kafkette.client.config import ConsumerConfig
from kafkette.client.metadata import BrokerInfo
from kafkette.consumer.fetch_buffer import CompletedFetch, FetchBuffer, end_offset
from kafkette.consumer.group.offsets import fetch_committed
from kafkette.consumer.metrics import MetricsRecorder
from kafkette.consumer.offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, list_offsets
from kafkette.consumer.subscription import EARLIEST, NO_RESET, PartitionState, SubscriptionState
from kafkette.errors import (
    CorruptMessageError,
    FencedLeaderEpochError,
    InvalidMetadataError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RetriableError,
    make_error,
)
from kafkette.protocol.messages import FetchRequest, FetchResponse
from kafkette.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkette.structs import TopicPartition

logger = logging.getLogger("kafkette.consumer")

READ_UNCOMMITTED = 0
READ_COMMITTED = 1
FIRST_VERSION_WITH_TOPIC_IDS = 13
ZERO_UUID = uuid.UUID(int=0)
HAND_OVER_FIRST_BYTES = 4 * 1024
"""An answer of at most this many record bytes that an async ``poll`` task waits for is
handed to it before the next FetchRequest is written. Written first, that request (~50 µs of
Python and a send that wakes the broker, which on two cores often takes this thread's core
until it has answered) delayed records that were ready: from the answer's buffering to
``poll``'s return took 283 µs (p50) and 502 µs (p90) at 1,000 records/s, 130 and 193 µs
handed over first. A larger answer takes ``poll`` longer to parse, and the broker reads the
next request meanwhile: at 50,000 records/s (answers of one 16 KiB batch) handing those
over first cost 12% more CPU per record and no latency. A sync consumer's loop thread
waits for its woken poll thread instead (:meth:`FetchBuffer.yield_to_woken`, at most
:data:`HAND_OVER_WAIT_S`). (Under trio, which shuffles what is runnable, the poll task may
run second.)"""
HAND_OVER_WAIT_S = 0.001
"""How long a sync consumer's loop thread waits at most for the poll thread it woke before
it writes the next FetchRequest anyway: a poll thread that gets no core that soon must not
hold up fetching (at 1,000 records/s on two busy cores, 0.3-2% of the waits)."""


class Fetcher:
    """Fetches for the assigned partitions; see the module docstring."""

    def __init__(
        self,
        client: KafkaClient,
        config: ConsumerConfig,
        subscriptions: SubscriptionState,
        buffer: FetchBuffer,
        metrics: MetricsRecorder,
    ) -> None:
        self.client = client
        self.config = config
        self.subscriptions = subscriptions
        self.buffer = buffer
        self.metrics = metrics
        self.read_committed = config.isolation_level == "read_committed"
        self.isolation_level = READ_COMMITTED if self.read_committed else READ_UNCOMMITTED
        self._busy_nodes: set[int] = set()
        self._node_retry_at: dict[int, tuple[int, float]] = {}  # node -> (failures, not before)
        self._reset_retry_at = 0.0
        self._reset_failures = 0
        self._metadata_retry_at = 0.0
        self._metadata_failures = 0
        self._refreshing = False
        self._wakeup = anyio.Event()
        self._round_at = 0.0  # when the last round began (client clock, ms)
        self._closed = False
        self._read_replicas: dict[TopicPartition, tuple[int, float]] = {}
        """KIP-392: the replica a leader named to fetch a partition from, until when (the
        metadata's max age, as Java's consumer); dropped on an error or a failed fetch."""

    # ---- control (event loop thread)

    def wake(self) -> None:
        """Plan another round now (after a seek, a resume, a drained fetch...)."""
        self._wakeup.set()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    async def run(self) -> None:
        """Fetch until :meth:`close`; errors for the application go to the buffer."""
        async with anyio.create_task_group() as tg:
            while not self._closed:
                self._wakeup = anyio.Event()
                self._round_at = self.client.clock()
                try:
                    delay_ms = await self._round(tg)
                except Exception as exc:
                    # A bug or an unexpected answer must not stop fetching silently.
                    logger.exception("consumer fetch round failed")
                    self._report(exc, self.subscriptions.assigned())
                    delay_ms = float(self.config.retry_backoff_max_ms)
                if self._closed:
                    break
                with anyio.move_on_after(delay_ms / 1000):
                    await self._wakeup.wait()
            tg.cancel_scope.cancel()

    async def _round(self, tg: anyio.abc.TaskGroup) -> float:
        """Start what can be started; return how long to wait at most before the next round."""
        now = self.client.clock()
        wait_ms = float(self.config.fetch_max_wait_ms + self.config.request_timeout_ms)
        if self.subscriptions.awaiting_reset():
            if now >= self._reset_retry_at:
                tg.start_soon(self._reset_positions)
                self._reset_retry_at = now + self.config.default_api_timeout_ms
            else:
                wait_ms = min(wait_ms, self._reset_retry_at - now)
        if self.subscriptions.assigned() and self.client.metadata.needs_update(now):
            # In the background, as Java's client does: the partitions whose leader is
            # known (or was named by a KIP-951 hint) are fetched meanwhile.
            if self._refreshing:
                pass  # its end wakes the next round
            elif now >= self._metadata_retry_at:
                self._refreshing = True
                tg.start_soon(self._refresh_metadata)
            else:
                wait_ms = min(wait_ms, self._metadata_retry_at - now)
        plan, leaderless = self._plan()
        if leaderless:
            # Some partition has no known leader (a topic not created yet, a moving
            # leader): ask again after a backoff; the others are fetched meanwhile.
            self.client.metadata.request_update()
            if not self._refreshing:
                wait_ms = min(wait_ms, self._metadata_retry_at - now)
        for node, partitions in plan.items():
            if node in self._busy_nodes:
                continue
            _, not_before = self._node_retry_at.get(node, (0, 0.0))
            if not_before > now:
                wait_ms = min(wait_ms, not_before - now)
                continue
            self._busy_nodes.add(node)
            tg.start_soon(self._fetch, node, partitions)
        return max(wait_ms, 1.0)

    def _plan(self) -> tuple[dict[int, dict[TopicPartition, tuple[PartitionState, int]]], bool]:
        """Partitions to fetch by leader, with their fetch offsets; and whether
        some fetchable partition has no known leader."""
        snapshot = self.client.metadata.snapshot
        plan: dict[int, dict[TopicPartition, tuple[PartitionState, int]]] = {}
        leaderless = False
        now = self.client.clock()
        for tp, state in self.subscriptions.fetchable():
            offset = self.buffer.next_offset(tp, state)
            if offset is None:
                continue
            leader = snapshot.leader_for(tp.topic, tp.partition)
            if leader is None:
                leaderless = True
                continue
            replica, until = self._read_replicas.get(tp, (leader, 0.0))
            if replica != leader and (until <= now or replica not in snapshot.brokers):
                del self._read_replicas[tp]
                replica = leader
            plan.setdefault(replica, {})[tp] = (state, offset)
        return plan, leaderless

    async def _refresh_metadata(self) -> None:
        """Refresh the assigned topics' metadata; back off while it fails or leaves
        partitions without a leader. Wakes the next round when done."""
        try:
            await self._refresh_metadata_now()
        except Exception as exc:  # as an error of a round: for the application, then back off
            self._report(exc, self.subscriptions.assigned())
            self._metadata_retry_at = self.client.clock() + self.config.retry_backoff_max_ms
        finally:
            self._refreshing = False
            self.wake()

    async def _refresh_metadata_now(self) -> None:
        topics = self.subscriptions.topics()
        self.client.metadata.wanted_topics.update(topics)
        try:
            snapshot = await self.client.refresh_metadata(self.client.metadata.wanted_topics)
            complete = all(
                snapshot.leader_for(tp.topic, tp.partition) is not None
                for tp in self.subscriptions.assigned()
            )
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            logger.info("consumer metadata refresh failed: %s", exc)
            complete = False
        if complete:
            self._metadata_failures = 0
            delay = float(self.config.retry_backoff_ms)
        else:
            delay = backoff_ms(
                self._metadata_failures,
                self.config.retry_backoff_ms,
                self.config.retry_backoff_max_ms,
            )
            self._metadata_failures += 1
        self._metadata_retry_at = self.client.clock() + delay

    # ---- offsets

    async def _reset_positions(self) -> None:
        """Resolve missing positions: the group's committed offsets first (partitions newly
        assigned to a consumer with a ``group.id``), then a reset (earliest / latest) with
        ListOffsets for the rest."""
        if not await self._positions_from_committed():
            return
        wanted = {
            tp: strategy
            for tp, strategy in self.subscriptions.awaiting_reset().items()
            if strategy != NO_RESET
        }
        if not wanted:
            self._reset_retry_at = 0.0
            self.wake()
            return
        specs = {
            tp: EARLIEST_TIMESTAMP if strategy == EARLIEST else LATEST_TIMESTAMP
            for tp, strategy in wanted.items()
        }
        try:
            found = await list_offsets(
                self.client,
                specs,
                isolation_level=self.isolation_level,
                timeout_ms=self.config.default_api_timeout_ms,
            )
        except RetriableError as exc:
            logger.info("resetting positions failed, will retry: %s", exc)
            self._reset_failures += 1
            self._reset_retry_at = self.client.clock() + backoff_ms(
                self._reset_failures,
                self.config.retry_backoff_ms,
                self.config.retry_backoff_max_ms,
            )
            return
        except Exception as exc:
            self._report(exc, specs)
            self._reset_retry_at = self.client.clock() + self.config.retry_backoff_max_ms
            return
        self._reset_failures = 0
        self._reset_retry_at = 0.0
        for tp, answer in found.items():
            apply_reset(self.subscriptions, tp, wanted[tp], answer.offset if answer else None)
        self.wake()

    async def _positions_from_committed(self) -> bool:
        """Take the group's committed offsets as positions where there are some; False when
        reading them failed (the reset waits for the next try)."""
        partitions = self.subscriptions.awaiting_committed()
        group_id = self.config.group_id
        if not partitions or group_id is None:
            return True
        try:
            await take_committed_positions(
                self.client,
                self.subscriptions,
                group_id,
                partitions,
                deadline_ms=self.client.clock() + self.config.default_api_timeout_ms,
            )
        except Exception as exc:
            logger.info("reading committed offsets failed, will retry: %s", exc)
            self._reset_failures += 1
            self._reset_retry_at = self.client.clock() + backoff_ms(
                self._reset_failures,
                self.config.retry_backoff_ms,
                self.config.retry_backoff_max_ms,
            )
            if not isinstance(exc, RetriableError):
                self._report(exc, partitions)
            return False
        return True

    # ---- fetch

    async def _fetch(
        self, node: int, partitions: dict[TopicPartition, tuple[PartitionState, int]]
    ) -> None:
        try:
            while partitions:
                self.buffer.fetching(partitions)
                try:
                    quiet = await self._fetch_from(node, partitions)
                finally:
                    self.buffer.fetched(partitions)  # poll wakes us again from now on
                fetched, partitions = partitions, self._next_from(node)
                # A round for what this node's next fetch leaves out (news of other nodes,
                # errors, partitions moved or not fetchable now), and at least every
                # retry.backoff.ms for the timers it watches; not after every answer: for
                # the sync consumer it would run between telling poll and the loop's wait.
                if (
                    not quiet
                    or not partitions.keys() >= fetched.keys()
                    or self.client.clock() - self._round_at >= self.config.retry_backoff_ms
                ):
                    self.wake()
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            logger.info("fetch from node %d failed: %s", node, exc)
            for tp in partitions:  # back to the leader
                self._read_replicas.pop(tp, None)
            self.client.metadata.request_update()
            self._node_backoff(node)
        except Exception as exc:
            # Anything else (an unsupported version, a malformed answer) goes to poll.
            logger.warning("fetch from node %d failed: %r", node, exc)
            self._node_backoff(node)
            self._report(exc, partitions)
        finally:
            self._busy_nodes.discard(node)
            self.wake()

    def _next_from(self, node: int) -> dict[TopicPartition, tuple[PartitionState, int]]:
        """What to fetch from ``node`` next, right after its answer: sent in the same step
        as the answer's records were buffered, so the broker reads the next records while
        ``poll`` works on these (a round would wait for the loop's next turn, and the sync
        consumer's thread holds the interpreter meanwhile). Nothing when closed or when the
        node is backing off."""
        if self._closed:
            return {}
        _, not_before = self._node_retry_at.get(node, (0, 0.0))
        if not_before > self.client.clock():
            return {}
        plan, _ = self._plan()
        return plan.get(node, {})

    def _report(self, exc: Exception, partitions: Iterable[TopicPartition]) -> None:
        """Hand ``exc`` to the application: ``poll`` raises it (once per partition)."""
        if isinstance(exc, KafkaError):
            error = exc
        else:
            error = KafkaError(f"consumer fetch failed: {exc!r}")
            error.__cause__ = exc
        for tp in partitions:
            state = self.subscriptions.get(tp)
            if state is not None:
                self.buffer.add(CompletedFetch.failed(tp, state, error))

    def _node_backoff(self, node: int) -> None:
        failures, _ = self._node_retry_at.get(node, (0, 0.0))
        delay = backoff_ms(failures, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms)
        self._node_retry_at[node] = (failures + 1, self.client.clock() + delay)

    async def _fetch_from(
        self, node: int, partitions: dict[TopicPartition, tuple[PartitionState, int]]
    ) -> bool:
        """Fetch ``partitions`` from ``node``, the records into the buffer; whether the
        answer was quiet: no error, no leader hint, no read replica named."""
        connection = await self.client.connection(node)
        snapshot = self.client.metadata.snapshot
        topic_ids: dict[str, uuid.UUID] = {}
        for tp in partitions:
            info = snapshot.topics.get(tp.topic)
            topic_ids[tp.topic] = info.topic_id if info is not None else ZERO_UUID
        version = connection.version_for(FetchRequest)
        if version >= FIRST_VERSION_WITH_TOPIC_IDS and ZERO_UUID in topic_ids.values():
            version = FIRST_VERSION_WITH_TOPIC_IDS - 1
        config = self.config
        topics: dict[str, list[FetchPartition]] = {}
        for tp, (_, offset) in partitions.items():
            info = snapshot.topics.get(tp.topic)
            epoch = -1
            if info is not None and tp.partition < len(info.partitions):
                epoch = info.partitions[tp.partition].leader_epoch
            topics.setdefault(tp.topic, []).append(
                FetchPartition(
                    partition=tp.partition,
                    current_leader_epoch=epoch,
                    fetch_offset=offset,
                    partition_max_bytes=config.max_partition_fetch_bytes,
                )
            )
        request = FetchRequest(
            replica_id=-1,
            max_wait_ms=config.fetch_max_wait_ms,
            min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_max_bytes,
            isolation_level=self.isolation_level,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchTopic(topic=name, topic_id=topic_ids[name], partitions=parts)
                for name, parts in topics.items()
            ],
            rack_id=config.client_rack,
        )
        started = self.client.clock()
        response = await connection.request(request, version=version)
        assert isinstance(response, FetchResponse)
        self._node_retry_at.pop(node, None)
        if response.error_code != 0:
            error = make_error(response.error_code, f"fetch from node {node}")
            logger.info("fetch from node %d failed: %s", node, error)
            self._node_backoff(node)
            return False
        size, quiet = self._handle(node, partitions, response, version, topic_ids)
        self.metrics.fetch_done(self.client.clock() - started, size)
        if 0 < size <= HAND_OVER_FIRST_BYTES:
            # the woken poll task, or thread, runs first
            if self.buffer.async_waiting:
                await anyio.lowlevel.checkpoint()
            else:
                self.buffer.yield_to_woken(HAND_OVER_WAIT_S)
        return quiet

    def _handle(
        self,
        node: int,
        partitions: dict[TopicPartition, tuple[PartitionState, int]],
        response: FetchResponse,
        version: int,
        topic_ids: dict[str, uuid.UUID],
    ) -> tuple[int, bool]:
        """Buffer the answer's records; its record bytes, and whether it was quiet (no
        partition error, no preferred read replica)."""
        names = {topic_id: name for name, topic_id in topic_ids.items()}
        total = 0
        quiet = True
        refresh = False
        hints: list[tuple[str, int, int, int]] = []
        for topic in response.responses:
            if version >= FIRST_VERSION_WITH_TOPIC_IDS:
                name: str | None = names.get(topic.topic_id)
            else:
                name = topic.topic
            if name is None:
                continue
            for p in topic.partitions:
                tp = TopicPartition(name, p.partition_index)
                sent = partitions.get(tp)
                if sent is None:
                    continue
                state, fetch_offset = sent
                if self.subscriptions.get(tp) is not state:
                    continue  # unassigned (or reassigned) meanwhile
                if self.buffer.next_offset(tp, state) != fetch_offset:
                    continue  # a seek or a reset made this answer stale
                if p.preferred_read_replica >= 0:  # KIP-392: fetch from that replica
                    until = self.client.clock() + self.config.metadata_max_age_ms
                    self._read_replicas[tp] = (p.preferred_read_replica, until)
                    quiet = False
                elif p.error_code != 0:
                    self._read_replicas.pop(tp, None)
                    quiet = False
                if p.error_code == 0:
                    state.high_watermark = p.high_watermark
                    if p.last_stable_offset >= 0:
                        state.last_stable_offset = p.last_stable_offset
                    if p.log_start_offset >= 0:
                        state.log_start_offset = p.log_start_offset
                    records = p.records
                    if not records:
                        continue
                    end = end_offset(records)
                    total += len(records)
                    if end is None or end <= fetch_offset:
                        if end is None and len(records) >= config_limit(self.config):
                            logger.warning(
                                "%s: a record batch at offset %d is larger than the fetch "
                                "size; the broker returned only part of it",
                                tp,
                                fetch_offset,
                            )
                        continue
                    aborted = (
                        [(a.first_offset, a.producer_id) for a in p.aborted_transactions]
                        if self.read_committed and p.aborted_transactions
                        else []
                    )
                    self.buffer.add(
                        CompletedFetch(
                            tp,
                            state,
                            fetch_offset,
                            records,
                            end,
                            aborted=aborted,
                            read_committed=self.read_committed,
                            check_crcs=self.config.check_crcs,
                        )
                    )
                    continue
                refresh |= self._partition_error(tp, state, fetch_offset, p.error_code)
                if p.error_code in _LEADER_MOVED:
                    leader = p.current_leader
                    hints.append((name, p.partition_index, leader.leader_id, leader.leader_epoch))
        if hints:
            # KIP-951: fetch from the new leaders at once (the refresh still follows)
            self.client.metadata.apply_leader_hints(
                hints,
                (BrokerInfo(e.node_id, e.host, e.port, e.rack) for e in response.node_endpoints),
            )
        if refresh:
            self.client.metadata.request_update()
            self._node_backoff(node)
        return total, quiet

    def _partition_error(
        self, tp: TopicPartition, state: PartitionState, fetch_offset: int, code: int
    ) -> bool:
        """Handle one partition's error; True when metadata must be refreshed."""
        error = make_error(code, f"fetching {tp} at offset {fetch_offset}")
        if isinstance(error, OffsetOutOfRangeError):
            if state.position != fetch_offset:
                return True  # fetched ahead of the position: retry from the position later
            strategy = self.subscriptions.default_reset
            if strategy != NO_RESET:
                logger.info(
                    "%s: offset %d out of range, resetting to %s", tp, fetch_offset, strategy
                )
                self.subscriptions.request_reset(tp, strategy)
                self.wake()
            else:
                self.buffer.add(CompletedFetch.failed(tp, state, error))
            return False
        if isinstance(error, InvalidMetadataError):
            logger.info("%s: %s; refreshing metadata", tp, error.name)
            return True
        if isinstance(error, RetriableError) and not isinstance(error, CorruptMessageError):
            logger.info("%s: %s; will retry", tp, error.name)
            return True
        self.buffer.add(CompletedFetch.failed(tp, state, error))
        return False


_LEADER_MOVED = frozenset({NotLeaderOrFollowerError.code, FencedLeaderEpochError.code})
"""Partition errors whose answer may name the new leader (KIP-951)."""


def config_limit(config: ConsumerConfig) -> int:
    return min(config.max_partition_fetch_bytes, config.fetch_max_bytes)


async def take_committed_positions(
    client: KafkaClient,
    subscriptions: SubscriptionState,
    group_id: str,
    partitions: list[TopicPartition],
    *,
    deadline_ms: float,
) -> None:
    """Read the group's committed offsets of ``partitions`` and take them as positions;
    a partition with none committed is left to its reset strategy."""
    committed = await fetch_committed(client, group_id, partitions, deadline_ms=deadline_ms)
    for tp, found in committed.items():
        state = subscriptions.get(tp)
        if state is None or state.position is not None or not state.committed_first:
            continue  # unassigned, sought or reset meanwhile
        state.committed_first = False
        if found is not None:
            state.position = found.offset


def apply_reset(
    subscriptions: SubscriptionState, tp: TopicPartition, strategy: str, offset: int | None
) -> None:
    """Set a position found by ListOffsets, unless the partition moved on meanwhile."""
    state = subscriptions.get(tp)
    if state is None or state.position is not None or state.reset != strategy:
        return
    if offset is None:
        return
    state.position = offset
