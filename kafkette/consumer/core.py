"""The consumer's machinery, shared by :class:`AsyncConsumer` and :class:`Consumer`.

:class:`ConsumerCore` owns the client, the subscription state, the fetch
buffer and the fetcher. Its control operations (assign, seek, offsets...) run
in the event loop; :meth:`ConsumerCore.drain` may run in any thread: it takes
the buffer's lock once per completed fetch and parses records in the calling
thread, so the sync consumer's ``poll`` never crosses threads per record.

Who owns what: :class:`SubscriptionState` says which partitions are read and
where; the :class:`Fetcher` only reads it (and resets positions it is asked
to); ``drain`` advances positions. A group coordinator client (a later
issue) will sit beside the fetcher and drive ``SubscriptionState.assign``
and the committed positions; nothing here needs to change for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from kafkette.client.client import KafkaClient
from kafkette.client.config import ConsumerConfig
from kafkette.consumer.fetch_buffer import CompletedFetch, FetchBuffer
from kafkette.consumer.fetcher import Fetcher, apply_reset
from kafkette.consumer.metrics import ConsumerMetrics, MetricsRecorder
from kafkette.consumer.offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    OffsetAndTimestamp,
    list_offsets,
)
from kafkette.consumer.record import ConsumerRecord
from kafkette.consumer.subscription import (
    EARLIEST,
    LATEST,
    NONE,
    NoOffsetForPartitionError,
    SubscriptionState,
)
from kafkette.errors import CorruptMessageError, IllegalStateError, KafkaTimeoutError
from kafkette.structs import TopicPartition

Records = dict[TopicPartition, list[ConsumerRecord]]


def check_partitions(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    result = list(partitions)
    for tp in result:
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"expected a TopicPartition, got {tp!r}")
    return result


class ConsumerCore:
    """State and fetcher of one consumer; create it inside the event loop."""

    def __init__(self, config: ConsumerConfig) -> None:
        self.config = config
        self.client = KafkaClient(config)
        self.subscriptions = SubscriptionState(config.auto_offset_reset)
        self.buffer = FetchBuffer()
        self.metrics_recorder = MetricsRecorder()
        self.fetcher = Fetcher(
            self.client, config, self.subscriptions, self.buffer, self.metrics_recorder
        )
        self.read_committed = config.isolation_level == "read_committed"
        self.key_deserializer = config.key_deserializer
        self.value_deserializer = config.value_deserializer
        # How poll wakes the fetcher: directly in the loop, or through the sync bridge.
        self.wake_fetcher: Callable[[], None] = self.fetcher.wake
        self.closed = False

    def check_open(self) -> None:
        if self.closed:
            raise IllegalStateError("the consumer is closed")

    # ---- control (event loop)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self.check_open()
        wanted = check_partitions(partitions)
        for tp in self.subscriptions.assign(wanted):
            self.buffer.drop(tp)
        self.client.metadata.wanted_topics.update(tp.topic for tp in wanted)
        self.fetcher.wake()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.check_open()
        self.subscriptions.seek(tp, offset)
        self.buffer.drop(tp)
        self.fetcher.wake()

    def seek_to(self, partitions: Iterable[TopicPartition], strategy: str) -> None:
        """Reset ``partitions`` (all assigned when empty) to the earliest or latest offset."""
        self.check_open()
        tps = check_partitions(partitions) or sorted(self.subscriptions.assigned())
        for tp in tps:
            self.subscriptions.state(tp)
        for tp in tps:
            self.subscriptions.request_reset(tp, strategy)
            self.buffer.drop(tp)
        self.fetcher.wake()

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self.check_open()
        for tp in check_partitions(partitions):
            self.subscriptions.pause(tp)

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self.check_open()
        for tp in check_partitions(partitions):
            self.subscriptions.resume(tp)
        self.fetcher.wake()

    async def position(self, tp: TopicPartition, timeout_ms: float | None) -> int:
        """The offset of the next record ``poll`` returns for ``tp``, resolving it if unknown."""
        self.check_open()
        state = self.subscriptions.state(tp)
        budget = self._timeout(timeout_ms)
        deadline = self.client.clock() + budget
        while state.position is None:
            strategy = state.reset
            if strategy == NONE:
                raise NoOffsetForPartitionError(f"{tp} has no position and auto.offset.reset=none")
            left = deadline - self.client.clock()
            if left <= 0:
                raise KafkaTimeoutError(f"could not resolve the position of {tp} in time")
            spec = EARLIEST_TIMESTAMP if strategy == EARLIEST else LATEST_TIMESTAMP
            found = await list_offsets(
                self.client, {tp: spec}, isolation_level=self._isolation(), timeout_ms=left
            )
            answer = found.get(tp)
            apply_reset(self.subscriptions, tp, strategy, answer.offset if answer else None)
            if self.subscriptions.get(tp) is not state:
                raise IllegalStateError(f"partition {tp} was unassigned")
        self.fetcher.wake()
        return state.position

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: float | None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        self.check_open()
        for tp, ts in timestamps.items():
            check_partitions([tp])
            if ts < 0:
                raise ValueError(f"timestamp for {tp} must not be negative, got {ts}")
        return await list_offsets(
            self.client,
            timestamps,
            isolation_level=self._isolation(),
            timeout_ms=self._timeout(timeout_ms),
        )

    async def edge_offsets(
        self, partitions: Iterable[TopicPartition], spec: int, timeout_ms: float | None
    ) -> dict[TopicPartition, int]:
        """Earliest (``spec`` -2) or latest (-1; the LSO for read_committed) offsets."""
        self.check_open()
        tps = check_partitions(partitions)
        found = await list_offsets(
            self.client,
            dict.fromkeys(tps, spec),
            isolation_level=self._isolation(),
            timeout_ms=self._timeout(timeout_ms),
        )
        return {tp: answer.offset if answer else -1 for tp, answer in found.items()}

    def _isolation(self) -> int:
        return self.fetcher.isolation_level

    def _timeout(self, timeout_ms: float | None) -> float:
        return float(self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.fetcher.close()
        self.buffer.clear()
        self.buffer.wake_waiters()
        await self.client.close()

    # ---- poll (any thread)

    def check_positions(self) -> None:
        missing = self.subscriptions.missing_positions()
        if missing:
            names = ", ".join(str(tp) for tp in sorted(missing))
            raise NoOffsetForPartitionError(
                f"no position for {names} and auto.offset.reset=none: seek first"
            )

    def drain(self, limit: int) -> Records:
        """Up to ``limit`` already-fetched records, grouped by partition."""
        result: Records = {}
        remaining = limit
        buffer = self.buffer
        subscriptions = self.subscriptions
        kd, vd = self.key_deserializer, self.value_deserializer
        while remaining > 0:
            entry = buffer.first_ready(_paused)
            if entry is None:
                break
            tp = entry.tp
            if entry.error is not None:
                if result:
                    break
                buffer.remove(entry)
                self.wake_fetcher()
                raise entry.error
            state = entry.state
            if subscriptions.get(tp) is not state or state.position != entry.position:
                buffer.remove(entry)  # seeked or unassigned since it was fetched
                self.wake_fetcher()
                continue
            try:
                records, done = entry.take(remaining, kd, vd)
            except CorruptMessageError as exc:
                buffer.replace(entry, CompletedFetch.failed(tp, state, exc))
                if result:
                    break
                continue
            if records:
                got = result.get(tp)
                if got is None:
                    result[tp] = records
                else:
                    got += records
                remaining -= len(records)
            if done:
                buffer.remove(entry)
                self.metrics_recorder.bytes_consumed += entry.size
                self.wake_fetcher()
        self.metrics_recorder.records_consumed += limit - remaining
        return result

    def metrics(self) -> ConsumerMetrics:
        lag: dict[TopicPartition, int] = {}
        for tp in self.subscriptions.assigned():
            value = self.subscriptions.lag(tp, self.read_committed)
            if value is not None:
                lag[tp] = value
        return self.metrics_recorder.snapshot(lag)


def _paused(entry: CompletedFetch) -> bool:
    return entry.state.paused


__all__ = ["EARLIEST", "LATEST", "ConsumerCore", "Records"]
