"""What the async and the sync producer share: serialization, partitioning, topic
metadata, the steps of a send and of a close.

:class:`~kafkette.producer.producer.AsyncProducer` and
:class:`~kafkette.producer.sync_producer.Producer` differ only where they
wait: for a topic's metadata, for room in ``buffer.memory`` and for the
event loop (the sync one runs it in a background thread). A send is
``routes.send`` (the common record, headers included, no waiting: the C append;
for a producer with serializers or transactions, :meth:`ProducerCore.prepare_record`
then ``routes.send_prepared``), else
:meth:`ProducerCore.prepare_send`, the wait for the topic's metadata when
the returned partition is None, and :meth:`ProducerCore.admit`; a flush is
:meth:`ProducerCore.flushing` and the wait for its results; a transactional
call goes to :meth:`ProducerCore.transaction_runner`; a close is
:meth:`ProducerCore.mark_closed` and :meth:`ProducerCore.shutdown` in the
event loop.

Keys, values and header values are bytes. Without a serializer a key or
value must be ``bytes``, ``bytearray``, ``memoryview`` or ``None``: a ``str``
raises :class:`SerializationError` rather than being silently encoded, since
Kafka clients leave the encoding to the application (pass
``value_serializer=str.encode`` to send text). A serializer is a callable
``serializer(obj) -> bytes``; it is not called for ``None``. Header values
may also be ``str`` (encoded as UTF-8); headers are given as a sequence of
``(key, value)`` pairs or a mapping.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from kafkette.client.backoff import backoff_ms
from kafkette.client.client import KafkaClient
from kafkette.client.config import ProducerConfig
from kafkette.client.telemetry import attach_producer
from kafkette.clocks import monotonic_ms
from kafkette.errors import (
    AuthenticationError,
    BufferExhaustedError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    SerializationError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kafkette.producer import speedups as producer_speedups
from kafkette.producer.accumulator import BufferFull, RecordAccumulator, record_size
from kafkette.producer.futures import BatchResult, RecordFuture
from kafkette.producer.partitioner import StickyPartitioner
from kafkette.producer.sender import Sender
from kafkette.producer.speedups import RouteState, keyed_partition
from kafkette.producer.transactions import ProducerTxnState, TransactionManager
from kafkette.producer.txn_runner import TransactionRunner, end_open_transaction
from kafkette.protocol.records import codec_id

if TYPE_CHECKING:
    from kafkette.otel.producer import ProducerTelemetry

HeadersArg = Sequence[tuple[str, Any]] | Mapping[str, Any] | None
Headers = Sequence[tuple[str, bytes | None]]
Routed = tuple[int | None, bytes | None, bytes | None, Headers, int]

_now = time.time
MAX_TIMESTAMP = (1 << 63) - 1
"""A record timestamp is a signed 64-bit count of milliseconds."""

_BYTES_LIKE = (bytearray, memoryview)
_IN_TRANSACTION = ProducerTxnState.IN_TRANSACTION
"""The one state a transactional send is allowed in (``TransactionManager.check_send``)."""

MISSING_TOPIC_ANSWERS = 3
"""Metadata answers of UNKNOWN_TOPIC_OR_PARTITION after which a send to that topic fails
(if :data:`MISSING_TOPIC_GRACE_MS` passed too)."""
MISSING_TOPIC_GRACE_MS = 1_000
"""How long a send waits at least for a topic the broker says is unknown: one created by
another client meanwhile may take that long to reach every broker's metadata."""


def _to_bytes(obj: Any, serializer: Callable[[Any], Any] | None, what: str) -> bytes | None:
    if obj is None:
        return None
    if serializer is not None:
        try:
            obj = serializer(obj)
        except SerializationError:
            raise
        except Exception as exc:
            raise SerializationError(f"the {what} serializer failed: {exc!r}") from exc
        if obj is None:
            return None
    if type(obj) is bytes:
        return obj
    if isinstance(obj, (bytes, *_BYTES_LIKE)):
        return bytes(obj)
    hint = f" (pass bytes, or set {what}_serializer, e.g. str.encode)" if serializer is None else ""
    raise SerializationError(f"the {what} must be bytes or None, not {type(obj).__name__}{hint}")


def _headers(headers: HeadersArg) -> list[tuple[str, bytes | None]]:
    if not headers:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    result: list[tuple[str, bytes | None]] = []
    for item in items:
        try:
            hkey, hvalue = item
        except (TypeError, ValueError):
            raise SerializationError(
                f"a header must be a (key, value) pair, not {item!r}"
            ) from None
        if not isinstance(hkey, str):
            raise SerializationError(f"a header key must be a str, not {type(hkey).__name__}")
        if hvalue is None or type(hvalue) is bytes:
            result.append((hkey, hvalue))
        elif isinstance(hvalue, str):
            result.append((hkey, hvalue.encode()))
        elif isinstance(hvalue, (bytes, *_BYTES_LIKE)):
            result.append((hkey, bytes(hvalue)))
        else:
            raise SerializationError(
                f"header {hkey!r}: value must be bytes, str or None, not {type(hvalue).__name__}"
            )
    return result


class ProducerCore:
    """Client, accumulator, sender and the per-record logic of one producer."""

    __slots__ = (
        "accumulator",
        "client",
        "clock",
        "closed",
        "config",
        "key_serializer",
        "partitioner",
        "routes",
        "sender",
        "telemetry",
        "transactions",
        "value_serializer",
    )

    def __init__(
        self, config: ProducerConfig, *, clock: Callable[[], float] = monotonic_ms
    ) -> None:
        self.config = config
        self.clock = clock
        self.closed = False
        self.client = KafkaClient(config, clock=clock)
        attach_producer(self.client, self.metrics)  # KIP-714 (enable.metrics.push)
        self.accumulator = RecordAccumulator(
            batch_size=config.batch_size,
            linger_ms=config.linger_ms,
            buffer_memory=config.buffer_memory,
            max_block_ms=config.max_block_ms,
            compression=codec_id(config.compression_type),
            delivery_timeout_ms=config.delivery_timeout_ms,
            max_request_size=config.max_request_size,
            clock=clock,
        )
        self.sender = Sender(self.client, self.accumulator, config, clock=clock)
        self.transactions: TransactionRunner | None = None
        if config.transactional_id is not None:
            assert self.sender.idempotence is not None  # the config makes sure
            runner = TransactionRunner(
                TransactionManager(config.transactional_id, config.transaction_timeout_ms),
                self.client,
                self.accumulator,
                config,
                self.sender.idempotence,
                spawn=self.sender.start_background,
                wakeup=self.sender.wakeup,
            )
            self.sender.txn = runner.manager
            self.sender.before_transactional_pass = runner.before_sender_pass
            self.transactions = runner
        self.key_serializer: Callable[[Any], Any] | None = config.key_serializer
        self.value_serializer: Callable[[Any], Any] | None = config.value_serializer
        self.partitioner: Callable[[bytes | None, int], int] | None = config.partitioner
        self.telemetry: ProducerTelemetry | None = None
        """OpenTelemetry's spans and metrics (docs/observability.md); None when off. The
        producers' send then starts each record's trace (:meth:`ProducerTelemetry.start_send
        <kafkette.otel.producer.ProducerTelemetry.start_send>`), on the general path: the
        common send is turned off."""
        if (
            config.tracer_provider is not None
            or config.meter_provider is not None
            or (config.opentelemetry)
        ):
            from kafkette.otel import producer_telemetry

            self.telemetry = producer_telemetry(config)
        self.routes = RouteState(
            self.client.metadata,
            self.accumulator,
            StickyPartitioner(config.batch_size),
            keyed_partition,
            # whether the common send may take records: no transactions, serializers,
            # user partitioner or telemetry to go through
            self.transactions is None
            and self.telemetry is None
            and self.key_serializer is None
            and self.value_serializer is None
            and self.partitioner is None,
            config.partitioner_ignore_keys,
        )
        """What the common send needs (:func:`send_plain`); :meth:`route` keeps its
        cached partition counts current."""
        # a producer with serializers or transactions: its records take the C append too
        # once prepare_record serialized them and checked the transaction
        self.routes.prepared = (
            not self.routes.plain and self.telemetry is None and self.partitioner is None
        )
        if self.transactions is not None:
            self.routes.transaction = self.transactions.manager.noted

    # ---- state

    def check_open(self) -> None:
        if self.closed:
            raise IllegalStateError("the producer is closed")

    def check_fatal(self) -> None:
        """Raise the sender's error once it failed (every record pending failed with it)."""
        fatal = self.sender.fatal_error
        if fatal is not None:
            raise fatal

    def mark_closed(self) -> bool:
        """Refuse every call from now on; whether the producer was open (a second close
        has nothing to do)."""
        was_open = not self.closed
        self.closed = True
        return was_open

    # ---- per record

    def prepare_send(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: HeadersArg,
        partition: int | None,
        timestamp: int | None,
        serialized: bool = False,
    ) -> Routed:
        """The first step of a send that ``routes.send`` did not take: check the
        producer and its transaction, then :meth:`route` the record (``serialized``:
        :meth:`prepare_record` serialized its key and value already).

        When the returned partition is None, the caller waits for the topic with
        :meth:`wait_for_topic` and gives its partition count to :meth:`admit`.
        """
        self.check_fatal()
        if self.transactions is not None:
            self.check_transaction()
        return self.route(topic, value, key, headers, partition, timestamp, serialized)

    def prepare_record(self, value: Any, key: Any) -> tuple[bytes | None, bytes | None]:
        """What a send of a producer with serializers or transactions does before
        ``routes.send_prepared`` (``routes.prepared``), as :meth:`prepare_send` does it
        (the caller checked that the sender has not failed): check the transaction,
        then serialize the value and the key. The general path then takes them as
        serialized."""
        runner = self.transactions
        if runner is not None:
            manager = runner.manager
            if manager.state is not _IN_TRANSACTION or manager.producer_id < 0:
                manager.check_send()  # raises
        serializer = self.value_serializer
        if value is not None and (serializer is not None or type(value) is not bytes):
            value = _to_bytes(value, serializer, "value")
        serializer = self.key_serializer
        if key is not None and (serializer is not None or type(key) is not bytes):
            key = _to_bytes(key, serializer, "key")
        return value, key

    def admit(self, topic: str, routed: Routed, partition: int | None, count: int) -> int:
        """The last step before the append: the record's partition (chosen now if the
        topic's metadata had to be waited for: ``count`` partitions), added to the
        open transaction, which is checked again (it may have ended meanwhile)."""
        chosen, key, value, headers, _ = routed
        if chosen is None:
            chosen = self.choose_partition(topic, key, value, headers, partition, count)
        if self.transactions is not None:
            self.check_transaction()
            self.add_to_transaction(topic, chosen)
        return chosen

    def buffer_exhausted(self, full: BufferFull) -> BufferExhaustedError:
        """The error of a send that found no room in ``buffer.memory`` within ``max.block.ms``."""
        return BufferExhaustedError(
            f"{self.accumulator.buffer_used} of buffer.memory={self.config.buffer_memory} "
            f"bytes stayed in use for max.block.ms={self.config.max_block_ms}; "
            f"{full.size} more were needed"
        )

    def route(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: HeadersArg,
        partition: int | None,
        timestamp: int | None,
        serialized: bool = False,
    ) -> Routed:
        """Serialize a record (unless ``serialized``) and pick its partition.

        The returned partition is None when the topic's metadata is not known
        yet (or lacks ``partition``): the caller waits for it with
        :meth:`wait_for_topic`, then calls :meth:`choose_partition`.
        """
        # the hot path of every send: common cases are tested inline
        if not serialized:
            if value is not None and (
                type(value) is not bytes or self.value_serializer is not None
            ):
                value = _to_bytes(value, self.value_serializer, "value")
            if key is not None and (type(key) is not bytes or self.key_serializer is not None):
                key = _to_bytes(key, self.key_serializer, "key")
        header_list = _headers(headers) if headers else ()
        if timestamp is None:
            timestamp = int(_now() * 1000)
        elif type(timestamp) is not int or not 0 <= timestamp <= MAX_TIMESTAMP:
            raise ValueError(f"timestamp must be milliseconds since the epoch, got {timestamp!r}")
        routes = self.routes
        snapshot = self.client.metadata.snapshot
        if snapshot is not routes.snapshot:
            routes.snapshot = snapshot
            routes.counts = {}
        count = routes.counts.get(topic)
        if count is None:
            count = snapshot.partition_count(topic)
            if not count:
                self.check_partition(partition)
                return None, key, value, header_list, timestamp
            routes.counts[topic] = count
        if partition is None and self.partitioner is None and (key is None or routes.ignore_keys):
            if count == 1:  # nothing to choose (and no sticky state to keep)
                return 0, key, value, header_list, timestamp
            size = 21 + (len(value) if value is not None else 0)
            return routes.sticky.partition(topic, count, size), key, value, header_list, timestamp
        if partition is not None:
            self.check_partition(partition)
            if partition >= count:
                return None, key, value, header_list, timestamp
        chosen = self.choose_partition(topic, key, value, header_list, partition, count)
        return chosen, key, value, header_list, timestamp

    def append_plain(
        self, topic: str, value: Any, key: Any, timestamp: int | None
    ) -> RecordFuture | None:
        """Queue a record without headers, explicit partition or callback: the common send.

        Returns None when the general path must take it (see
        :meth:`RouteState.send <kafkette.producer.append_state.RouteState.send>`):
        that path then does the same, or waits, or raises the right error. The
        caller checked the producer is running.
        """
        return self.routes.send(topic, value, key, timestamp)

    def choose_partition(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: Headers,
        partition: int | None,
        count: int,
    ) -> int:
        """The partition for a record: explicit, user partitioner, murmur2 or sticky."""
        if partition is not None:
            if partition >= count:
                raise UnknownTopicOrPartitionError(
                    f"partition {partition} of topic {topic!r}: the topic has {count} partition(s)"
                )
            return partition
        if self.partitioner is not None:
            chosen = self.partitioner(key, count)
            if not isinstance(chosen, int) or not 0 <= chosen < count:
                raise ValueError(
                    f"the partitioner returned {chosen!r} for topic {topic!r} of {count} partitions"
                )
            return chosen
        if key is not None and not self.routes.ignore_keys:
            return keyed_partition(key, count)
        return self.routes.sticky.partition(topic, count, record_size(key, value, headers))

    def check_transaction(self) -> None:
        """Raise unless a send is allowed now (a transactional producer needs an open
        transaction); called before the record is routed."""
        runner = self.transactions
        if runner is not None:
            runner.manager.check_send()

    def add_to_transaction(self, topic: str, partition: int) -> None:
        """Note the partition a record goes to, so it is added to the transaction."""
        runner = self.transactions
        if runner is not None:
            runner.manager.add_partition((topic, partition))

    @staticmethod
    def check_partition(partition: int | None) -> None:
        if partition is not None and (
            isinstance(partition, bool) or not isinstance(partition, int) or partition < 0
        ):
            raise ValueError(f"partition must be a non-negative int, got {partition!r}")

    # ---- topics (event loop)

    async def wait_for_topic(self, topic: str, partition: int | None = None) -> int:
        """Wait up to ``max.block.ms`` for ``topic`` (and ``partition``) to be in the metadata.

        The metadata request allows auto-creation, as Kafka's producer does. A broker
        that creates topics answers that the topic is being created (LEADER_NOT_AVAILABLE),
        then that it is there; one that does not (``auto.create.topics.enable=false``)
        keeps answering UNKNOWN_TOPIC_OR_PARTITION. After :data:`MISSING_TOPIC_ANSWERS`
        such answers over at least :data:`MISSING_TOPIC_GRACE_MS` (time for a topic
        created meanwhile to reach the broker's metadata), the send fails with
        :class:`UnknownTopicOrPartitionError` naming the topic, instead of waiting out
        ``max.block.ms`` (Java waits, then says the topic is "not present in metadata").
        """
        if not topic:
            raise ValueError("the topic name must not be empty")
        metadata = self.client.metadata
        metadata.wanted_topics.add(topic)
        deadline = self.clock() + self.config.max_block_ms
        attempt = 0
        last: BaseException | None = None
        unknown_answers = 0
        unknown_since = 0.0
        while True:
            info = metadata.snapshot.topics.get(topic)
            if info is not None:
                if info.error_code == 0 and info.partitions:
                    count = len(info.partitions)
                    if partition is None or partition < count:
                        return count
                    last = UnknownTopicOrPartitionError(
                        f"partition {partition} of topic {topic!r}: "
                        f"the topic has {count} partition(s)"
                    )
                elif info.error_code:
                    error_class = error_for_code(info.error_code)
                    assert error_class is not None
                    if not error_class.retriable:
                        metadata.wanted_topics.discard(topic)
                        raise error_class(f"topic {topic!r}")
                    last = error_class(f"topic {topic!r}")
            remaining = deadline - self.clock()
            if remaining <= 0:
                if isinstance(last, UnknownTopicOrPartitionError) and partition is not None:
                    raise last
                detail = f"; last error: {last}" if last is not None else ""
                raise KafkaTimeoutError(
                    f"topic {topic!r} not present in metadata after "
                    f"max.block.ms={self.config.max_block_ms}{detail}"
                )
            try:
                # bounded here too: a refresh by the sender may hold the metadata lock
                with anyio.move_on_after(remaining / 1000) as scope:
                    await self.client.refresh_metadata(
                        metadata.wanted_topics, allow_auto_topic_creation=True, timeout_ms=remaining
                    )
            except AuthenticationError:
                raise  # wrong credentials: waiting out max.block.ms would not help
            except KafkaError as exc:
                last = exc
                continue
            info = metadata.snapshot.topics.get(topic)
            if scope.cancelled_caught:
                pass  # no answer of ours: the snapshot may hold an answer without auto-creation
            elif info is not None and info.error_code == UnknownTopicOrPartitionError.code:
                now = self.clock()
                if unknown_answers == 0:
                    unknown_since = now
                unknown_answers += 1
                waited = now - unknown_since
                if unknown_answers >= MISSING_TOPIC_ANSWERS and waited >= MISSING_TOPIC_GRACE_MS:
                    metadata.wanted_topics.discard(topic)
                    raise UnknownTopicOrPartitionError(
                        f"topic {topic!r} does not exist and the broker does not create it: "
                        f"{unknown_answers} metadata answers over {waited:.0f} ms said "
                        "UNKNOWN_TOPIC_OR_PARTITION (is auto.create.topics.enable false on "
                        "the broker? create the topic first)"
                    )
            else:
                unknown_answers = 0
            if info is None or info.error_code or not info.partitions:
                wait = backoff_ms(
                    attempt, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms
                )
                attempt += 1
                await anyio.sleep(min(wait, max(deadline - self.clock(), 0)) / 1000)

    # ---- flush

    @contextlib.contextmanager
    def flushing(self) -> Iterator[list[BatchResult]]:
        """A flush: makes every batch queued now ready at once and gives the results to
        wait for; then raises the sender's error once it failed."""
        self.check_open()
        results = self.accumulator.begin_flush()
        try:
            yield results
        finally:
            self.accumulator.end_flush()
        self.check_fatal()

    # ---- transactions and close (event loop)

    def transaction_runner(self) -> TransactionRunner:
        """The runner, for a transactional call: the producer is open, and has not failed
        (then its transaction can only be closed)."""
        self.check_open()
        self.check_fatal()
        return self.runner()

    def runner(self) -> TransactionRunner:
        """The transactional producer's runner; IllegalStateError without ``transactional.id``."""
        if self.transactions is None:
            raise IllegalStateError(
                "transactions need a transactional.id in the producer's configuration"
            )
        return self.transactions

    def timeout_s(self, timeout: float | None) -> float:
        """A transactional call's timeout in seconds: ``timeout``, else ``max.block.ms``."""
        return self.config.max_block_ms / 1000 if timeout is None else timeout

    async def shutdown(self, timeout: float | None) -> None:
        """Close: end an open transaction (abort it, as Java does), deliver what is pending
        within ``timeout`` seconds (each), then stop the sender and close the connections.

        Records still undelivered after the timeout fail with :class:`KafkaTimeoutError`.
        """
        if self.transactions is not None:
            with anyio.move_on_after(timeout):
                await end_open_transaction(self.transactions)
        sender = self.sender
        self.accumulator.close()
        sender.stop()
        try:
            with anyio.move_on_after(timeout):
                await sender.finished.wait()
        finally:
            if not sender.finished.is_set():  # timed out, or interrupted
                sender.abort(
                    KafkaTimeoutError(
                        f"the producer was closed after {timeout}s with records undelivered"
                    )
                )
                with anyio.CancelScope(shield=True):
                    await sender.finished.wait()
            with anyio.CancelScope(shield=True):
                await self.client.close()

    # ---- metrics

    def metrics(self) -> dict[str, float]:
        """A snapshot of the producer's counters."""
        m = self.sender.metrics
        return {
            "records_sent": m.records_sent,
            "bytes_sent": m.bytes_sent,
            "batches_sent": m.batches_sent,
            "requests_sent": m.requests_sent,
            "retries": m.retries,
            "batches_split": m.batches_split,
            "errors": m.errors,
            "request_latency_avg_ms": m.latency_total_ms / m.requests_sent
            if m.requests_sent
            else 0.0,
            "request_latency_max_ms": m.latency_max_ms,
            "record_queue_time_avg_ms": m.queue_time_total_ms / m.batches_drained
            if m.batches_drained
            else 0.0,
            "record_queue_time_max_ms": m.queue_time_max_ms,
            "produce_throttle_time_avg_ms": m.throttle_time_total_ms / m.throttle_answers
            if m.throttle_answers
            else 0.0,
            "produce_throttle_time_max_ms": m.throttle_time_max_ms,
            "buffer_bytes_used": self.accumulator.buffer_used,
            "buffer_memory": self.accumulator.buffer_memory,
            "batches_incomplete": self.accumulator.incomplete,
            "requests_in_flight": self.sender.in_flight,
        }


SendPlain = Callable[[ProducerCore, str, Any, Any, "int | None"], "RecordFuture | None"]
send_plain: SendPlain = ProducerCore.append_plain
"""``send_plain(core, topic, value, key, timestamp)``: :meth:`ProducerCore.append_plain`
(``core.routes.send(...)``), in one C call when the extension is in use (it calls
the accumulator's Python method when a batch must be opened)."""
if producer_speedups.send_plain is not None:
    send_plain = producer_speedups.send_plain
