"""The sender: the event-loop task that turns ready batches into Produce requests.

Each pass (:meth:`Sender._pass`): expire batches past
``delivery.timeout.ms``, get a producer id if idempotence needs one, ask the
accumulator which partitions are ready, group them by leader, and for every
leader with fewer than ``max.in.flight.requests.per.connection`` requests
outstanding drain one batch per partition (up to ``max.request.size``) into
one ProduceRequest. How requests go out, pipelined:

- Submitted (:meth:`BrokerConnection.submit
  <kafkette.client.connection.BrokerConnection.submit>`), while the
  connection keeps up: the requests of one pass to one broker go out in one
  write (at once under asyncio over TCP; through the connection's pump task,
  started here, under trio and in process); the response is handled in the
  connection's callback, and once the responses read together are handled,
  one pass sends what they made room for. No task per request.
- Otherwise (``acks=0``, or a connection whose socket is not keeping up):
  handed to worker tasks, one per request in flight, which await the response.

The sender's task (:meth:`Sender.run`) runs a pass, then sleeps until woken
(new batch, full batch, flush, a response of a worker) or until the next
linger, backoff or expiry deadline. While it sleeps, passes also run from
plain event-loop callbacks, one loop turn sooner than a woken task's: after
responses, at a deadline under asyncio (a timer; trio's task sleeps with the
deadline instead), when a sync producer's thread reports a batch opened or
filled (:meth:`Sender.nudge`), and under asyncio inside an async producer's ``send``
once enough batches were opened (:meth:`Sender.news`). Under asyncio a deadline within
:data:`TIMER_SLACK_MS` counts as come, since its timers fire on whole milliseconds;
not in a sync producer's own loop, whose timers fire when due.

Responses: what each partition's answer means is read in
:mod:`kafkette.producer.produce_outcomes` (one table of error code ->
outcome, and the decision for the batch); this module applies it. Success
resolves the batch (offset of record *i* = base offset + *i*);
DUPLICATE_SEQUENCE_NUMBER is a success; retriable errors and lost
connections put the batch back at the head of its partition (in sequence
order) after ``retry.backoff.ms``..``retry.backoff.max.ms`` with jitter, and
mark the metadata stale when it may be (a leader moved). When the response
names the new leader (KIP-951), the metadata is patched at once. A batch of
several records the broker finds too large (MESSAGE_TOO_LARGE) is cut in two
and sent again, as the Java client does. Other errors fail the batch's
futures with the error class.

Ordering: with idempotence, up to 5 requests per partition are in flight and
the broker orders them by sequence; a partition whose batch came back for a
retry sends one batch at a time until it succeeds again. Without
idempotence and with ``max.in.flight.requests.per.connection=1`` a partition
with a batch in flight is not drained; with more in flight, a retry may
reorder records, as in Kafka.

Producer ids: an idempotent producer's InitProducerId is built and read by
:class:`~kafkette.producer.idempotence.IdempotenceState`; the sender sends it
when no batch is in flight.

Transactions: with a ``transactional.id`` the producer id comes from
``init_transactions`` (not from here), batches carry the transactional
attribute, and a partition's batches wait until the transaction coordinator
added the partition. The sender holds the
:class:`~kafkette.producer.transactions.TransactionManager` (the state) and
calls :attr:`Sender.before_transactional_pass` at each pass, with which the
transaction runner starts AddPartitionsToTxn; the sender does not know the
runner. A failed batch makes the transaction abortable instead of bumping the
epoch, which only the abort may do.

Failure: an exception that escapes a pass, an answer's handling or a task of
the sender (a bug, a codec that cannot run) is fatal, as a fatal error of
Java's sender thread: :meth:`Sender.fail_fatally` fails every record not yet
acknowledged with it (queued, in flight, or drained and never sent), the
accumulator refuses new records with it, so ``send``, ``flush`` and the
transactional calls raise it, and :meth:`Sender.run` returns; ``close`` then
has nothing left to wait for.
"""

from __future__ import annotations

import asyncio
import logging
import random
from asyncio import TimerHandle
from collections import deque
from collections.abc import Callable, Container, Coroutine, Iterable
from typing import Any

import anyio
import anyio.abc
import attrs

from kafkette.client.backoff import backoff_ms
from kafkette.client.client import KafkaClient
from kafkette.client.config import ProducerConfig
from kafkette.client.connection import BrokerConnection
from kafkette.client.events import call_soon_factory, event_factory, timers_fire_when_due
from kafkette.client.metadata import BrokerInfo
from kafkette.clocks import monotonic_ms
from kafkette.errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    make_error,
)
from kafkette.producer.accumulator import PartitionKey, ProducerBatch, RecordAccumulator
from kafkette.producer.idempotence import IdempotenceState
from kafkette.producer.produce_outcomes import (
    BatchFacts,
    Outcome,
    RetryVerdict,
    Step,
    decide,
    outcome_for,
    refreshes_on_retry,
    retry_verdict,
)
from kafkette.producer.transactions import TransactionManager
from kafkette.protocol.messages import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafkette.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.protocol.schema import Response

logger = logging.getLogger("kafkette.producer")

MAX_WORKERS_PER_NODE = 16
TIMER_SLACK_MS = 0.5
"""Under asyncio, a batch whose linger (or backoff) ends within this many ms is sent now:
the event loop's timers fire on the first whole millisecond at or after their deadline (epoll's
resolution), so waiting for a deadline 0.3 ms away would send 1 ms late. Deadlines
then hold to within half a millisecond either way, as Java's whole-millisecond clock
holds them to within one. Not in a sync producer's loop (a
:class:`~kafkette.client.events.FineTimerLoop`), whose timers fire when due: there the
slack would send every batch half a millisecond early."""
NEWS_WRITE = 1 << 18
"""Bytes of records an async producer's ``send`` lets queue before it runs the sender's
pass itself (:meth:`Sender.news`): one write of many requests costs the caller far less
than one per batch (a 16 KiB write to a local broker takes ~30 µs, a 1 MiB one ~370 µs).
Counted in bytes appended, not batches opened: sending keyed records to many partitions
opens a batch for nearly every record, and a pass (which looks at every partition) per
batch cost more than the records."""
FAR_TIMER_MS = 1000.0
"""A deadline at least this far off (the expiry check, ``delivery.timeout.ms`` away) gets a
timer of its own, kept while the nearer ones (lingers) come and go: re-armed with every
linger, it was cancelled and made again each batch, and a cancelled asyncio timer stays in
the loop's heap until due or swept, every push and pop comparing more of them."""
WRITE_PER_PASS = 1 << 20
"""Bytes of batches one pass writes to a broker at most (a pass follows at once, until
the connection falls behind): a full accumulator is not copied into one write."""
LINGER_HOLD_IN_FLIGHT = 2
"""Requests to a broker still unanswered at which a batch that is ready only because its
linger ended waits for an answer instead of going out in one more request (full
batches, retries and a flush's batches still go, up to ``max.in.flight``): while the
broker is behind, its records join the batch. Without this, a producer sending to many
partitions with a high ``max.in.flight`` sends each partition's few records of a linger
in a batch of their own; the broker's and the client's cost per batch then slow both,
batches get smaller still and the rate collapses (200,000 keyed records over 1,000
partitions, async, on a loaded machine: 3.6 records a batch and a fifth of the rate).
Two, not one: the broker works on one request while the next waits in its socket (one
and two both end the collapse; the one-partition tables are the same with two as without
the hold). librdkafka holds batches the same way while
a request waits to be written (``queue.buffering.backpressure.threshold``); an answer
is the sign we have. Not while sends wait for room in ``buffer.memory``: nothing more
can join the batches then."""


def _loop_call_later() -> Callable[[float, Callable[[], object]], TimerHandle] | None:
    """The running asyncio loop's ``call_later``; None under trio (which has no plain
    timer callbacks: the sender's task then sleeps with a deadline)."""
    try:
        return asyncio.get_running_loop().call_later
    except RuntimeError:
        return None


def _single(error: BaseException) -> BaseException:
    """The one exception of a (nested) exception group of one, else ``error`` itself.

    Read by its ``exceptions`` (Python 3.10 has no built-in ExceptionGroup: anyio
    raises the backport's there).
    """
    while True:
        inner = getattr(error, "exceptions", None)
        if not (isinstance(inner, tuple) and len(inner) == 1):
            return error
        if not isinstance(inner[0], BaseException):
            return error
        error = inner[0]


class _Sink:
    """Requests waiting for one broker, and the idle worker tasks that send them.

    Workers are started once per broker and parked between requests: handing
    a request to a parked task costs far less than starting a task for it.
    """

    __slots__ = ("idle", "node", "queue", "workers")

    def __init__(self, node: int) -> None:
        self.node = node
        self.queue: deque[list[ProducerBatch]] = deque()
        self.idle: deque[anyio.Event] = deque()
        self.workers = 0


class _Submitted(list[ProducerBatch]):
    """A Produce request written without a task (:meth:`BrokerConnection.submit`): the
    list of its batches, with what its answer's handling needs.

    Called with the outcome from the event loop; the sender fails its
    batches itself if it is aborted first. It is the list of the batches,
    rather than holding one, so that a request in flight is one object for
    the garbage collector to count (its collections come at every ~700 such
    objects) instead of two.
    """

    __slots__ = ("done", "node", "sender", "started")
    __hash__ = object.__hash__  # type: ignore[assignment]  # by identity, in the sender's set

    def __init__(
        self, sender: Sender, node: int, batches: list[ProducerBatch], started: float
    ) -> None:
        super().__init__(batches)
        self.sender = sender
        self.node = node
        self.started = started
        self.done = False

    def __call__(self, response: Response | None, error: BaseException | None) -> None:
        if self.done:
            return
        self.done = True
        sender = self.sender
        sender._submitted.discard(self)
        try:
            sender._finish_produce(self.node, self, self.started, response, error, submitted=True)
        except Exception as exc:  # a bug: fail what is pending rather than hang
            sender.fail_fatally(exc)


class _Everything:
    def __contains__(self, item: object) -> bool:
        return True


class _NotInTransaction:
    """Partitions a transactional producer may not send to yet (or resyncing ones)."""

    def __init__(self, manager: TransactionManager, muted: Container[PartitionKey]) -> None:
        self.allowed = manager.send_allowed
        self.muted = muted

    def __contains__(self, item: object) -> bool:
        return item in self.muted or not self.allowed(item)  # type: ignore[arg-type]


@attrs.define
class SenderMetrics:
    """Counters of one producer's sender."""

    records_sent: int = 0
    bytes_sent: int = 0
    batches_sent: int = 0
    requests_sent: int = 0
    retries: int = 0
    batches_split: int = 0
    errors: int = 0
    latency_total_ms: float = 0.0
    latency_max_ms: float = 0.0
    queue_time_total_ms: float = 0.0
    """Time batches spent in the accumulator, creation to drain (each drain counts:
    a retried batch's second wait too, as Java's ``record-queue-time``)."""
    queue_time_max_ms: float = 0.0
    batches_drained: int = 0
    throttle_time_total_ms: float = 0.0
    """The produce answers' ``throttle_time_ms``, summed over :attr:`throttle_answers`."""
    throttle_time_max_ms: float = 0.0
    throttle_answers: int = 0


class Sender:
    """Drains the accumulator into Produce requests and handles the responses."""

    def __init__(
        self,
        client: KafkaClient,
        accumulator: RecordAccumulator,
        config: ProducerConfig,
        *,
        clock: Any = monotonic_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.accumulator = accumulator
        self.config = config
        self.clock = clock
        self.rng = rng or random.Random()
        self.idempotence = (
            IdempotenceState(transactional=config.transactional_id is not None)
            if config.idempotent
            else None
        )
        self.metrics = SenderMetrics()
        self.fatal_error: BaseException | None = None
        self._new_event = event_factory()
        self._wake = self._new_event()
        self._woken: anyio.Event | None = None
        """The wake-up event :meth:`news` set last (it sets each one once)."""
        self.finished = anyio.Event()
        self._stopping = False
        self._abort_error: BaseException | None = None
        self._node_in_flight: dict[int, int] = {}
        self._tp_in_flight: dict[PartitionKey, int] = {}
        self._counts_tp = self.idempotence is not None or (
            config.max_in_flight_requests_per_connection == 1
        )
        """Whether ``_tp_in_flight`` is kept: only :meth:`_muted` reads it, for an idempotent
        producer or one with one request in flight (a count per batch sent and answered)."""
        self._leaders: dict[PartitionKey, int | None] = {}
        """Each partition's leader in :attr:`_leaders_of` (a snapshot never changes: a new
        one replaces it), found once, not at every pass."""
        self._leaders_of: object = None
        self._resyncing: set[PartitionKey] = set()
        self._metadata_busy = False
        self._metadata_retry_at = 0.0
        self._metadata_failures = 0
        self._task_group: anyio.abc.TaskGroup | None = None
        self._sinks: dict[int, _Sink] = {}
        self._submitted: set[_Submitted] = set()
        self._drain_waits: set[int] = set()
        """Nodes whose connection fell behind, waited for (:meth:`_behind`)."""
        self._in_pass = False
        self._held = True
        """Whether the last pass left something it could not send for want of a place:
        a partition muted or without a leader, a broker throttling, falling behind or at
        ``max.in.flight``, or a producer id to get. Only then, or after an answer that was
        not a plain success, does an answer run a pass (:meth:`_finish_produce`): what
        else becomes ready (a batch opened or full, a linger or backoff ending, a flush)
        runs its own."""
        self._held_for_answer = False
        """Whether the last pass held a batch whose linger ended because its broker had
        :data:`LINGER_HOLD_IN_FLIGHT` requests unanswered: an answer runs a pass. (Not
        :attr:`_held`: a batch opened meanwhile needs no pass before its linger ends.)"""
        self._news_mark = 0
        """The accumulator's bytes in use at the last pass, or the least :meth:`news` has
        seen since (answers free batches between): the bytes above it were appended since."""
        self._pass_scheduled = False
        self._call_soon: Callable[[Callable[[], object]], object] | None = None
        self._asleep_until: float | None = None
        """When the sender's task wakes up on its own (None while it is not waiting)."""
        self._call_later: Callable[[float, Callable[[], object]], TimerHandle] | None = None
        """asyncio's ``loop.call_later`` (None under trio): the sleeping task's deadlines
        run their pass from a timer callback (:meth:`_on_timer`)."""
        self._timer: TimerHandle | None = None
        self._far_timer: TimerHandle | None = None
        """The timer of a deadline :data:`FAR_TIMER_MS` or more away (:meth:`_arm`)."""
        self._far_at = 0.0
        self._timer_at = 0.0
        self._slack_ms = 0.0
        """:data:`TIMER_SLACK_MS` under asyncio, whose timers fire on whole milliseconds;
        0 under trio, whose sleeping task wakes at the deadline (exactly, in virtual time),
        and in a sync producer's loop, whose timers fire when due
        (:class:`~kafkette.client.events.FineTimerLoop`)."""
        self._expiry_check_at = 0.0
        self.txn: TransactionManager | None = None
        """The transactional producer's state (None without transactional.id)."""
        self.before_transactional_pass: Callable[[], None] | None = None
        """Called at each pass of a transactional producer, before it drains: the
        transaction's I/O starts what the state asks for (AddPartitionsToTxn)."""
        self._background: list[Callable[[], Coroutine[Any, Any, None]]] = []
        self._outside_task = False
        """Whether a pass runs from a plain event-loop callback (:meth:`_pass_after_responses`)."""
        self._deferred: deque[tuple[Callable[..., Coroutine[Any, Any, object]], tuple[Any, ...]]]
        self._deferred = deque()
        """Tasks such a pass needs, started by the sender's task when it wakes up."""

    # ---- control (event loop thread only)

    def wakeup(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Finish sending everything accepted, then return from :meth:`run`."""
        self._stopping = True
        self.wakeup()

    def abort(self, error: BaseException) -> None:
        """Fail everything not yet acknowledged with ``error`` and return from :meth:`run`."""
        self._abort_error = error
        for sink in self._sinks.values():
            while sink.queue:
                for batch in sink.queue.popleft():
                    self.accumulator.fail(batch, error)
        submitted, self._submitted = self._submitted, set()
        for request in submitted:
            request.done = True
            for batch in request:
                self.accumulator.fail(batch, error)
            self._release_in_flight(request.node, request)
        # the rest: queued, in a worker's request, or drained and never sent (its
        # build raised); workers that are cancelled find theirs failed already
        self.accumulator.fail_all(error)
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()
        self.wakeup()

    def fail_fatally(self, error: BaseException, *, log: bool = True) -> None:
        """Stop for good after ``error`` escaped the sender (a bug, a codec that cannot
        run): every record not yet acknowledged fails with it, later sends raise it
        (:attr:`fatal_error`), and :meth:`run` returns, as Java's KafkaProducer
        does after a fatal error of its sender thread. A transaction can only be
        closed then. ``log=False``: nothing was lost, say nothing (a cancelled idle
        sender)."""
        if self.fatal_error is None:
            self.fatal_error = error
            if log:
                logger.error("producer sender failed", exc_info=error)
        self.accumulator.close(self.fatal_error)
        if self.txn is not None:
            self.txn.fatal(self.fatal_error)
        self.abort(error)

    @property
    def may_defer_news(self) -> bool:
        """Whether a batch opened now needs no pass before its linger ends: the last pass
        held nothing back (no producer id to get, no partition muted) and no transaction
        runs (whose pass adds a new partition to it). Read from a sending thread (a sync
        producer's :class:`~kafkette.client.linger_alarm.LingerAlarm`)."""
        return not self._held and self.txn is None

    @property
    def in_flight(self) -> int:
        return sum(self._node_in_flight.values())

    def start_background(self, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``task`` in the sender's task group (cancelled when the sender is aborted)."""
        if self._task_group is not None:
            self._spawn(self._task_group, task)
        else:
            self._background.append(task)

    def _spawn(
        self,
        tg: anyio.abc.TaskGroup,
        task: Callable[..., Coroutine[Any, Any, object]],
        *args: object,
    ) -> None:
        """Start ``task(*args)`` in the sender's task group; an exception that escapes it
        stops the sender (:meth:`fail_fatally`) instead of leaving the task group.

        From a pass run by a plain event-loop callback the sender's task starts it
        instead, woken for that: anyio cannot start a task where no task runs (it
        finds no event loop there under ``asyncio.run``)."""
        if self._outside_task:
            self._deferred.append((task, args))
            self.wakeup()
            return
        tg.start_soon(self._guarded, task, *args)

    async def _guarded(
        self, task: Callable[..., Coroutine[Any, Any, object]], *args: object
    ) -> None:
        try:
            await task(*args)
        except Exception as exc:  # a bug: fail what is pending rather than hang
            self.fail_fatally(exc)

    # ---- the loop

    async def run(self) -> None:
        """Send until stopped (all delivered) or aborted.

        Whatever ends it otherwise fails what is pending (:meth:`fail_fatally`):
        an exception of a pass or of a task in its task group, that error; a
        cancellation from outside (the producer's task group, the event loop
        going away), :class:`IllegalStateError`.
        """
        self._call_later = _loop_call_later()
        coarse = self._call_later is not None and not timers_fire_when_due()
        self._slack_ms = TIMER_SLACK_MS if coarse else 0.0
        try:
            async with anyio.create_task_group() as tg:
                self._task_group = tg
                for task in self._background:
                    self._spawn(tg, task)
                self._background.clear()
                while self._abort_error is None:
                    if self._stopping and self.accumulator.incomplete == 0:
                        break
                    try:
                        await self._turn(tg)
                    except Exception as exc:  # a bug: fail what is pending rather than hang
                        self.fail_fatally(exc)
                tg.cancel_scope.cancel()
        except Exception as exc:  # from a task not started by _spawn (a connection's pump)
            self.fail_fatally(_single(exc))
        finally:
            self._task_group = None
            self._disarm(far=True)
            if self._abort_error is None and not (
                self._stopping and self.accumulator.incomplete == 0
            ):
                # cancelled from outside (its owner's task group ending): an error
                # only for the records it leaves unacknowledged
                self.fail_fatally(
                    IllegalStateError("the producer's sender was cancelled"),
                    log=self.accumulator.incomplete > 0,
                )
            self.finished.set()

    async def _turn(self, tg: anyio.abc.TaskGroup) -> None:
        self._wake = self._new_event()
        deferred = self._deferred
        while deferred:
            task, args = deferred.popleft()
            tg.start_soon(self._guarded, task, *args)
        timeout_ms = self._pass(tg)
        if timeout_ms > 0:
            self._asleep_until = self.clock() + timeout_ms
            try:
                if self._call_later is not None:
                    # the deadline's pass runs in a plain timer callback (see _on_timer)
                    self._arm(timeout_ms)
                    await self._wake.wait()
                else:
                    with anyio.move_on_after(timeout_ms / 1000):
                        await self._wake.wait()
            finally:
                self._asleep_until = None
                self._disarm()
        else:
            await anyio.sleep(0)

    def _arm(self, timeout_ms: float) -> None:
        """Run a pass in ``timeout_ms`` from a timer callback, unless one comes sooner."""
        assert self._call_later is not None
        deadline = self.clock() + timeout_ms
        if timeout_ms >= FAR_TIMER_MS:
            far = self._far_timer
            if far is not None:
                if self._far_at <= deadline:
                    return
                far.cancel()
            self._far_at = deadline
            self._far_timer = self._call_later(timeout_ms / 1000, self._on_far_timer)
            return
        timer = self._timer
        if timer is not None:
            if self._timer_at <= deadline:
                return
            timer.cancel()
        self._timer_at = deadline
        self._timer = self._call_later(timeout_ms / 1000, self._on_timer)

    def _disarm(self, *, far: bool = False) -> None:
        """Cancel the timer of the near deadline; with ``far``, the far one's too (left, it
        fires when due, and its pass is one more pass)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        if far:
            timer, self._far_timer = self._far_timer, None
            if timer is not None:
                timer.cancel()

    def _on_timer(self) -> None:
        """A deadline of the sleeping task (linger, backoff, expiry) came: its pass runs
        here, in the timer's callback, instead of cancelling the task's wait and running
        it in the task one loop turn later."""
        self._timer = None
        self._pass_outside()

    def _on_far_timer(self) -> None:
        """:meth:`_on_timer` of the far deadline's timer."""
        self._far_timer = None
        self._pass_outside()

    def nudge(self) -> None:
        """The accumulator has news (a batch opened or filled up), told by a plain event
        loop callback (a sync producer's thread-safe wake-up): the pass runs here at once
        while the task sleeps, rather than in the task one loop turn later."""
        if self._asleep_until is None or self._wake.is_set():
            self.wakeup()
            return
        self._pass_outside()

    def news(self) -> None:
        """The accumulator has news (a batch opened or filled up, a flush began), told in
        the event loop's thread by the caller's own ``send`` or ``flush`` (the async
        producer's wake-up). Under asyncio, once the records appended since the last pass
        make :data:`NEWS_WRITE` bytes, or at a flush or close, the pass runs here, inside
        that call: the ready batches are written at once, in one write, and the broker
        works on them while the caller appends more. (A caller appending in a loop whose
        ``await send()`` never suspends would otherwise give the sender no turn before
        ``flush``.) Until then it only wakes the task, which looks when the loop runs.
        Answers are read and handled when the loop runs, as ever; what a pass settles at
        once (an expired batch, a request a closed connection refused) is settled inside
        that call. Also while the task is woken but has not run yet: the caller may not
        let it run for a while. Not while the last pass held batches for an answer
        (:data:`LINGER_HOLD_IN_FLIGHT`): that answer runs the next pass."""
        tg = self._task_group
        if (
            tg is None
            or self._in_pass
            or self._call_later is None
            or self._stopping
            or self._abort_error is not None
            or self.fatal_error is not None
        ):
            self.wakeup()
            return
        accumulator = self.accumulator
        if self._held_for_answer and not accumulator.hurried:
            # the answer the last pass held batches for runs the next pass: until then
            # a pass could only send batches that filled up, and the broker is behind
            return
        used = accumulator.buffer_used
        if used < self._news_mark:
            self._news_mark = used
        if used - self._news_mark < NEWS_WRITE and not accumulator.hurried:
            accumulator.rearm_wakeup()  # to be told of the next batch too
            # and the task looks when the loop runs, if no send looks first (woken once:
            # the event stays set until the task runs)
            wake = self._wake
            if wake is not self._woken:
                self._woken = wake
                wake.set()
            return
        timeout_ms = self._pass_from_callback(tg)
        if timeout_ms is None:
            return
        if timeout_ms > 0 and self._asleep_until is not None:
            self._arm(timeout_ms)
        else:
            self.wakeup()

    def _pass(self, tg: anyio.abc.TaskGroup) -> float:
        """Expire, refresh and send what is ready; ms until a pass is needed again."""
        self._in_pass = True
        self._news_mark = self.accumulator.buffer_used
        try:
            return self._pass_body(tg)
        finally:
            self._in_pass = False

    def _pass_body(self, tg: anyio.abc.TaskGroup) -> float:
        now = self.clock()
        if now >= self._expiry_check_at:
            for batch in self.accumulator.expire(now):
                self.metrics.errors += 1
                if self.idempotence is not None and batch.base_sequence >= 0:
                    self.idempotence.bump_needed = True  # its sequence left a gap
                if self.txn is not None and batch.error is not None:
                    self.txn.on_batch_failed(batch.error)
            # queued batches only get younger, and retries lower this again
            oldest = self.accumulator.next_expiry_ms(now)
            self._expiry_check_at = now + (
                oldest if oldest is not None else self.config.delivery_timeout_ms
            )
        delays: list[float] = [self._expiry_check_at - now]
        muted: Container[PartitionKey] = self._muted()
        idem = self.idempotence
        txn = self.txn
        if txn is not None:
            muted = self._transaction_muted(txn, muted)
        elif idem is not None and idem.needs_id:
            muted = _Everything()
            if self.accumulator.incomplete and self.in_flight == 0:
                wait = idem.init_due(now)
                if wait is None:
                    self._spawn(tg, self._init_producer_id, idem)
                else:
                    delays.append(wait)
        # muted partitions (a transaction's, those waiting for a producer id) may be
        # sendable after an answer; below, what else an answer may free
        self._held = bool(muted)
        self._held_for_answer = False
        ready, lingered, next_ms = self.accumulator.ready_by_cause(now + self._slack_ms, muted)
        if lingered:
            ready += lingered
        if next_ms is not None:
            delays.append(next_ms)
        snapshot = self.client.metadata.snapshot
        if snapshot is not self._leaders_of:
            self._leaders_of = snapshot
            self._leaders = {}
        leaders = self._leaders
        by_node: dict[int, list[PartitionKey]] = {}
        stale = self.client.metadata.needs_update(now)
        for tp in ready:
            leader = leaders.get(tp, -1)
            if leader == -1:
                leader = leaders[tp] = snapshot.leader_for(*tp)
            if leader is None:
                stale = self._held = True
                continue
            by_node.setdefault(leader, []).append(tp)
        if stale and self.client.metadata.wanted_topics:
            self._maybe_refresh_metadata(tg, now, delays)
        max_in_flight = self.config.max_in_flight_requests_per_connection
        may_hold = bool(lingered) and not self.accumulator.hurried
        held_back: set[PartitionKey] | None = None
        for node, tps in by_node.items():
            throttled_ms = self._throttled_ms(node)
            if throttled_ms > 0:  # the broker asked for nothing more until then (KIP-219)
                delays.append(throttled_ms)
                self._held = True
                continue
            if self._behind(node):
                self._held = True
                continue
            if may_hold and self._node_in_flight.get(node, 0) >= LINGER_HOLD_IN_FLIGHT:
                if held_back is None:
                    held_back = set(lingered)
                tps = [tp for tp in tps if tp not in held_back]
                self._held_for_answer = True
                if not tps:
                    continue
            if len(tps) > 1:
                # no partition always last in line for the request size: a random start
                # (a shuffle cost ~0.5 us a partition, each pass, at 1,000 partitions)
                start = self.rng.randrange(len(tps))
                if start:
                    tps = tps[start:] + tps[:start]
            corked = self._cork(tg, node)
            try:
                more = self._send_to(tg, node, tps, max_in_flight, now, corked, delays)
            finally:
                if corked is not None:
                    corked.uncork()
            if more:
                delays.append(0.0)
                self._held = True
        return max(min(delays), 0.0)

    def _behind(self, node: int) -> bool:
        """Whether the node's connection is not keeping up with what was written: its
        batches then stay queued until it drains, when a pass sends them. (Requests
        handed to workers would wait there, each for its answer: at most
        :data:`MAX_WORKERS_PER_NODE` in flight, whatever ``max.in.flight``.)"""
        if self.config.acks == 0:
            return False
        connection = self.client.open_connection(node)
        if connection is None or not connection.behind:
            return False
        if node not in self._drain_waits:
            self._drain_waits.add(node)
            connection.when_drained(lambda: self._drained(node))
        return True

    def _drained(self, node: int) -> None:
        self._drain_waits.discard(node)
        self._after_response()

    def _after_response(self) -> None:
        """A submitted request was answered: once the responses read with it are
        handled too, send what they allow, from the event loop rather than by waking
        the sender's task (see :meth:`_pass_after_responses`)."""
        if self._pass_scheduled:
            return
        if (
            self._task_group is None
            or self._asleep_until is None
            or self._in_pass
            or self._stopping
            or self._abort_error is not None
        ):
            self.wakeup()
            return
        self._pass_scheduled = True
        if self._call_soon is None:
            self._call_soon = call_soon_factory()
        self._call_soon(self._pass_after_responses)

    def _pass_after_responses(self) -> None:
        """One pass for all the responses of a read: their freed places go out in one write."""
        self._pass_scheduled = False
        self._pass_outside()

    def _pass_outside(self) -> None:
        """A pass from a plain event-loop callback while the task sleeps.

        The task sleeps until a deadline its own pass computed; where the loop
        has timers (asyncio) the next deadline's pass is armed here, else the
        task is woken if this pass needs an earlier one (or it is no longer asleep).
        """
        tg = self._task_group
        asleep_until = self._asleep_until
        if tg is None or asleep_until is None or self._stopping or self._abort_error is not None:
            self.wakeup()
            return
        timeout_ms = self._pass_from_callback(tg)
        if timeout_ms is None:
            return
        if self._call_later is None:
            if self.clock() + timeout_ms < asleep_until:
                self.wakeup()
        elif timeout_ms > 0:
            self._arm(timeout_ms)
        else:
            self.wakeup()

    def _pass_from_callback(self, tg: anyio.abc.TaskGroup) -> float | None:
        """:meth:`_pass` where no task of the sender runs; None if it failed (fatally)."""
        self._outside_task = True
        try:
            return self._pass(tg)
        except Exception as exc:  # a bug: fail what is pending rather than hang
            self.fail_fatally(exc)
            return None
        finally:
            self._outside_task = False

    def _throttled_ms(self, node: int) -> float:
        connection = self.client.open_connection(node)
        return 0.0 if connection is None else connection.throttle_delay_ms()

    def _cork(self, tg: anyio.abc.TaskGroup, node: int) -> BrokerConnection | None:
        """The node's connection, corked, when requests to it are written at once
        (its pump started where submitting needs one: trio, ``memory://``)."""
        if self.config.acks == 0:
            return None
        connection = self.client.open_connection(node)
        if connection is None:
            return None
        if not self._outside_task:  # else the sender's task starts it, at its next pass
            connection.start_pump(tg)
        if not connection.can_submit:
            return None
        connection.cork()
        return connection

    def _send_to(
        self,
        tg: anyio.abc.TaskGroup,
        node: int,
        tps: list[PartitionKey],
        max_in_flight: int,
        now: float,
        corked: BrokerConnection | None,
        delays: list[float],
    ) -> bool:
        """Drain the ready partitions led by ``node`` into requests, while it takes more;
        whether it stopped at :data:`WRITE_PER_PASS` (into a corked connection, whose
        requests are submitted to it directly: it could submit when corked, and nothing
        is written, so nothing falls behind, until it is uncorked). When the batches
        behind those it took are not ready yet, the time until one is goes in ``delays``
        (no answer runs a pass to find it, unless :attr:`_held`)."""
        idem = self.idempotence
        prepare = idem.assign if idem is not None else None
        drain = self.accumulator.drain
        max_size = self.config.max_request_size
        node_in_flight = self._node_in_flight
        tp_in_flight = self._tp_in_flight if self._counts_tp else None
        metrics = self.metrics
        hurried = self.accumulator.hurried
        first = True
        written = 0
        while tps:
            in_flight = node_in_flight.get(node, 0)
            if in_flight >= max_in_flight:
                self._held = True  # an answer makes room for the rest
                break
            if corked is not None and written >= WRITE_PER_PASS:
                return True
            # the first drain takes the heads found ready; later ones (pipelining
            # more requests to this broker) only heads that are ready too, and once
            # LINGER_HOLD_IN_FLIGHT requests wait, only those ready whatever their linger
            hold = not hurried and in_flight >= LINGER_HOLD_IN_FLIGHT
            batches = drain(
                tps,
                max_size,
                None if first else now + self._slack_ms,
                prepare,
                pressing_only=hold and not first,
            )
            if not batches:
                if hold:
                    self._held_for_answer = True
                elif not first:
                    wait = self.accumulator.next_ready_ms(tps, now + self._slack_ms)
                    if wait is not None:
                        delays.append(wait)
                break
            first = False
            node_in_flight[node] = node_in_flight.get(node, 0) + 1
            metrics.batches_drained += len(batches)
            for batch in batches:
                if tp_in_flight is not None:
                    tp = batch.tp
                    tp_in_flight[tp] = tp_in_flight.get(tp, 0) + 1
                data = batch.data
                if data is not None:
                    written += len(data)
                # ``now`` is the pass's start: a batch a sync producer's thread opened
                # since then waited no time (not a negative one)
                queued = now - batch.created_ms
                if queued > 0:
                    metrics.queue_time_total_ms += queued
                    if queued > metrics.queue_time_max_ms:
                        metrics.queue_time_max_ms = queued
            if corked is not None:
                self._submit(corked, node, batches)
            else:
                self._dispatch(tg, node, batches)
            if self._resyncing:
                blocked = self._muted()
                unblocked = [tp for tp in tps if tp not in blocked]
                if len(unblocked) < len(tps):
                    self._held = True  # its answer unmutes the rest
                tps = unblocked
        return False

    def _transaction_muted(
        self, manager: TransactionManager, muted: Container[PartitionKey]
    ) -> Container[PartitionKey]:
        """What a transactional producer may not send now, once the transaction's
        I/O started what the state asks for (:attr:`before_transactional_pass`)."""
        if self.before_transactional_pass is not None:
            self.before_transactional_pass()
        if self.idempotence is None or not self.idempotence.has_id:
            return _Everything()
        return _NotInTransaction(manager, muted)

    def _dispatch(self, tg: anyio.abc.TaskGroup, node: int, batches: list[ProducerBatch]) -> None:
        if self.config.acks != 0:
            connection = self.client.open_connection(node)
            if connection is not None and connection.can_submit:
                self._submit(connection, node, batches)
                return
        sink = self._sinks.get(node)
        if sink is None:
            sink = self._sinks[node] = _Sink(node)
        sink.queue.append(batches)
        if sink.idle:
            sink.idle.popleft().set()
        elif sink.workers < MAX_WORKERS_PER_NODE:
            sink.workers += 1
            self._spawn(tg, self._worker, sink)

    async def _worker(self, sink: _Sink) -> None:
        while True:
            while sink.queue:
                await self._produce(sink.node, sink.queue.popleft())
            parked = self._new_event()
            sink.idle.append(parked)
            await parked.wait()

    def _muted(self) -> Container[PartitionKey]:
        if self.idempotence is not None:
            return {tp for tp in self._resyncing if self._tp_in_flight.get(tp, 0) > 0}
        if self.config.max_in_flight_requests_per_connection == 1:
            return {tp for tp, n in self._tp_in_flight.items() if n > 0}
        return ()

    # ---- metadata

    def _maybe_refresh_metadata(
        self, tg: anyio.abc.TaskGroup, now: float, delays: list[float]
    ) -> None:
        if self._metadata_busy:
            return
        if now < self._metadata_retry_at:
            delays.append(self._metadata_retry_at - now)
            return
        self._metadata_busy = True
        self._spawn(tg, self._refresh_metadata)

    async def _refresh_metadata(self) -> None:
        try:
            await self.client.refresh_metadata(
                self.client.metadata.wanted_topics, allow_auto_topic_creation=True
            )
            self._metadata_failures = 0
            self._metadata_retry_at = 0.0
        except KafkaError as exc:
            logger.info("producer metadata refresh failed: %s", exc)
            self._metadata_retry_at = self.clock() + self._backoff(self._metadata_failures)
            self._metadata_failures += 1
        finally:
            self._metadata_busy = False
            self.wakeup()

    def _apply_leader_hint(self, response: ProduceResponse) -> set[PartitionKey]:
        """KIP-951: take the new leaders a NOT_LEADER_OR_FOLLOWER answer names."""
        return self.client.metadata.apply_leader_hints(
            (
                (topic.name, p.index, p.current_leader.leader_id, p.current_leader.leader_epoch)
                for topic in response.responses
                for p in topic.partition_responses
                if p.error_code == NotLeaderOrFollowerError.code
            ),
            (BrokerInfo(e.node_id, e.host, e.port, e.rack) for e in response.node_endpoints),
        )

    # ---- producer id

    async def _init_producer_id(self, idem: IdempotenceState) -> None:
        """Send the InitProducerId that :meth:`IdempotenceState.init_request` builds."""
        try:
            node = await self.client.any_node()
            connection = await self.client.connection(node)
            version = connection.version_for(InitProducerIdRequest)
            request = idem.init_request(version, self.config.transaction_timeout_ms)
            response = await connection.request(request, version=version)
            assert isinstance(response, InitProducerIdResponse)
            was = (idem.producer_id, idem.epoch)
            idem.take_init_answer(response)
            logger.info("producer id %d epoch %d (was %d/%d)", idem.producer_id, idem.epoch, *was)
        except KafkaError as exc:
            if not exc.retriable:
                self.fatal_error = exc
                logger.error("producer cannot get a producer id: %s", exc)
                self.accumulator.abort(exc)
            idem.init_failed(self.clock(), self._backoff(idem.init_failures))
        finally:
            idem.init_busy = False
            self.wakeup()

    # ---- requests

    def _backoff(self, attempt: int) -> float:
        return backoff_ms(
            attempt, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms, self.rng
        )

    def _request(self, batches: list[ProducerBatch]) -> ProduceRequest:
        config = self.config
        if len(batches) == 1:  # the common request: one partition's batch
            only = batches[0]
            assert only.data is not None
            return ProduceRequest(
                config.transactional_id,
                config.acks,
                config.request_timeout_ms,
                [TopicProduceData(only.topic, [PartitionProduceData(only.partition, only.data)])],
            )
        topic = batches[0].topic
        if all(batch.topic == topic for batch in batches):  # one topic: the common request
            return ProduceRequest(
                config.transactional_id,
                config.acks,
                config.request_timeout_ms,
                [
                    TopicProduceData(
                        topic, [PartitionProduceData(b.partition, b.data) for b in batches]
                    )
                ],
            )
        topics: dict[str, list[PartitionProduceData]] = {}
        for batch in batches:
            assert batch.data is not None
            topics.setdefault(batch.topic, []).append(
                PartitionProduceData(index=batch.partition, records=batch.data)
            )
        return ProduceRequest(
            transactional_id=self.config.transactional_id,
            acks=self.config.acks,
            timeout_ms=self.config.request_timeout_ms,
            topic_data=[TopicProduceData(name=t, partition_data=p) for t, p in topics.items()],
        )

    def _submit(
        self, connection: BrokerConnection, node: int, batches: list[ProducerBatch]
    ) -> None:
        """Write the request now; the response is handled in the event loop's callback."""
        request = _Submitted(self, node, batches, self.clock())
        try:
            connection.submit(self._request(batches), request)
        except Exception as exc:  # a closed connection, or a request that cannot be encoded
            if not isinstance(exc, KafkaError):
                logger.exception("produce request to node %d failed", node)
            request(None, exc)
            return
        self._submitted.add(request)

    async def _produce(self, node: int, batches: list[ProducerBatch]) -> None:
        started = self.clock()
        try:
            response = await self.client.send(
                node, self._request(batches), expect_response=self.config.acks != 0
            )
        except anyio.get_cancelled_exc_class():
            error = self._abort_error or KafkaConnectionError("the producer was closed")
            for batch in batches:
                self.accumulator.fail(batch, error)
            self._release_in_flight(node, batches)
            self.wakeup()
            raise
        except Exception as exc:
            if not isinstance(exc, KafkaError):  # e.g. a request the protocol cannot encode
                logger.exception("produce request to node %d failed", node)
            self._finish_produce(node, batches, started, None, exc)
            return
        self._finish_produce(node, batches, started, response, None)

    def _finish_produce(
        self,
        node: int,
        batches: list[ProducerBatch],
        started: float,
        response: Response | None,
        error: BaseException | None,
        *,
        submitted: bool = False,
    ) -> None:
        """Settle a request's batches: acknowledged, retried or failed."""
        plain = False  # every batch acknowledged
        try:
            if error is not None:
                for batch in batches:
                    if isinstance(error, KafkaError):
                        self._retry_or_fail(batch, error)
                    else:
                        self._fail(batch, error)
                return
            latency = self.clock() - started
            metrics = self.metrics
            metrics.requests_sent += 1
            metrics.latency_total_ms += latency
            if latency > metrics.latency_max_ms:
                metrics.latency_max_ms = latency
            if response is None:
                for batch in batches:
                    self._succeeded(batch, -1, -1)
                return
            assert isinstance(response, ProduceResponse)
            throttle = response.throttle_time_ms
            metrics.throttle_answers += 1
            metrics.throttle_time_total_ms += throttle
            if throttle > metrics.throttle_time_max_ms:
                metrics.throttle_time_max_ms = throttle
            plain = self._handle_response(batches, response)
        finally:
            self._release_in_flight(node, batches)
            if not submitted:
                self.wakeup()
            elif not plain or self._held or self._held_for_answer or self._stopping:
                self._after_response()
            # else what the answer freed was not wanted (see _held): no pass

    def _release_in_flight(self, node: int, batches: list[ProducerBatch]) -> None:
        self._node_in_flight[node] -= 1
        if self._counts_tp:
            tp_in_flight = self._tp_in_flight
            for batch in batches:
                tp_in_flight[batch.tp] -= 1

    def _handle_response(self, batches: list[ProducerBatch], response: ProduceResponse) -> bool:
        """Settle the answered batches; whether every one was acknowledged (stored, no
        error)."""
        if len(response.responses) == 1:
            # the common answer: one topic, every partition stored without error, in the
            # request's order; settled together (one lock for all, not one per batch)
            answered = response.responses[0]
            name = answered.name
            stored = answered.partition_responses
            if len(stored) == len(batches):
                if len(batches) == 1:
                    only, one = batches[0], stored[0]
                    if one.error_code == 0 and one.index == only.partition and name == only.topic:
                        self._succeeded(only, one.base_offset, one.log_append_time_ms)
                        return True
                else:
                    settled: list[tuple[ProducerBatch, int, int]] = []
                    for sent, part in zip(batches, stored, strict=True):
                        if part.error_code or part.index != sent.partition or sent.topic != name:
                            break
                        settled.append((sent, part.base_offset, part.log_append_time_ms))
                    else:
                        self._succeeded_all(settled)
                        return True
        by_tp = {batch.tp: batch for batch in batches}
        if all(p.error_code == 0 for t in response.responses for p in t.partition_responses):
            # every partition stored, in another order
            settled = []
            for topic in response.responses:
                name = topic.name
                for p in topic.partition_responses:
                    batch = by_tp.pop((name, p.index), None)
                    if batch is not None:
                        settled.append((batch, p.base_offset, p.log_append_time_ms))
            self._succeeded_all(settled)
            if not by_tp:
                return True
            return self._unanswered(by_tp.values())
        hinted: set[PartitionKey] | None = None
        plain = True
        for topic in response.responses:
            for p in topic.partition_responses:
                batch = by_tp.pop((topic.name, p.index), None)
                if batch is None:
                    continue
                code = p.error_code
                if code == 0:
                    self._succeeded(batch, p.base_offset, p.log_append_time_ms)
                    continue
                outcome = outcome_for(code)
                if outcome is Outcome.DUPLICATE:
                    self._succeeded(batch, p.base_offset if p.base_offset >= 0 else -1, -1)
                    continue
                plain = False
                if outcome is Outcome.LEADER_MOVED and hinted is None:
                    hinted = self._apply_leader_hint(response)
                detail = f"{batch.topic}-{batch.partition}"
                if p.error_message:
                    detail += f": {p.error_message}"
                self._on_error(
                    batch,
                    make_error(code, detail),
                    outcome,
                    leader_known=hinted is not None and batch.tp in hinted,
                )
        if by_tp:
            plain = self._unanswered(by_tp.values())
        return plain

    def _unanswered(self, batches: Iterable[ProducerBatch]) -> bool:
        """Retry (or fail) the batches an answer left out; False (not every one stored)."""
        for batch in batches:
            self._retry_or_fail(
                batch,
                KafkaConnectionError(
                    f"the broker did not answer for {batch.topic}-{batch.partition}"
                ),
            )
        return False

    def _succeeded_all(self, stored: list[tuple[ProducerBatch, int, int]]) -> None:
        """:meth:`_succeeded` of each (batch, base offset, log append time) of an answer."""
        idem = self.idempotence
        resyncing = self._resyncing
        records = size = 0
        for batch, _, _ in stored:
            if idem is not None:
                idem.acknowledged(batch)
            if resyncing:
                resyncing.discard(batch.tp)
            records += batch.count
            data = batch.data
            if data is not None:
                size += len(data)
        metrics = self.metrics
        metrics.batches_sent += len(stored)
        metrics.records_sent += records
        metrics.bytes_sent += size
        self.accumulator.complete_all(stored)

    def _succeeded(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self._succeeded_all([(batch, base_offset, log_append_time)])

    def _facts(self, batch: ProducerBatch) -> BatchFacts:
        idem = self.idempotence
        if idem is None:
            return BatchFacts(batch.record_count)
        return BatchFacts(
            batch.record_count,
            idempotent=True,
            transactional=self.txn is not None,
            sequenced=batch.base_sequence >= 0,
            owned=idem.owns(batch),
            next_expected=idem.is_next_expected(batch),
        )

    def _on_error(
        self, batch: ProducerBatch, error: KafkaError, outcome: Outcome, *, leader_known: bool
    ) -> None:
        """Apply :func:`decide`'s reading of an error answer to ``batch``."""
        decision = decide(outcome, self._facts(batch), leader_known=leader_known)
        idem = self.idempotence
        if decision.bump_epoch:
            assert idem is not None
            idem.bump_needed = True
        step = decision.step
        if step is Step.SPLIT:
            parts = self.accumulator.split(batch)
            self.metrics.batches_split += 1
            if decision.resync:
                self._resyncing.add(batch.tp)
            if decision.reuse_sequences:
                assert idem is not None
                idem.reuse_sequences(batch, parts)
        elif step is Step.RETRY:
            if decision.refresh_metadata:
                self.client.metadata.request_update()
            self._retry_or_fail(batch, error, count_attempt=decision.count_attempt)
        else:
            self._fail(batch, error)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        self.metrics.errors += 1
        idem = self.idempotence
        if idem is not None and idem.owns(batch):
            # its sequences will never reach the broker: later batches of the
            # partition could only get OUT_OF_ORDER_SEQUENCE_NUMBER; a new epoch
            # starts the sequences again
            idem.bump_needed = True
        if self.txn is not None:
            self.txn.on_batch_failed(error)
        self.accumulator.fail(batch, error)

    def _retry_or_fail(
        self, batch: ProducerBatch, error: KafkaError, *, count_attempt: bool = True
    ) -> None:
        now = self.clock()
        delay = self._backoff(batch.attempts)
        expires_at = batch.created_ms + self.config.delivery_timeout_ms
        verdict = retry_verdict(
            error,
            aborted=self._abort_error is not None,
            attempts=batch.attempts,
            retries=self.config.retries,
            count_attempt=count_attempt,
            retry_at_ms=now + delay,
            expires_at_ms=expires_at,
        )
        if verdict is not RetryVerdict.RETRY:
            if verdict is RetryVerdict.ABORTED:
                assert self._abort_error is not None
                self._fail(batch, self._abort_error)
            elif verdict is RetryVerdict.EXPIRED:
                self._fail(
                    batch,
                    KafkaTimeoutError(
                        f"{batch.record_count} record(s) for {batch.topic}-{batch.partition} "
                        f"expired: not delivered within "
                        f"delivery.timeout.ms={self.config.delivery_timeout_ms}; "
                        f"last error: {error}"
                    ),
                )
            else:
                self._fail(batch, error)
            return
        batch.last_error = error
        if refreshes_on_retry(error):
            self.client.metadata.request_update()
        if count_attempt:
            batch.attempts += 1
            self.metrics.retries += 1
        if self.idempotence is not None:
            self._resyncing.add(batch.tp)
        self._expiry_check_at = min(self._expiry_check_at, expires_at)
        self.accumulator.reenqueue(batch, now + delay)
