"""The transactional producer's I/O: coordinator requests for the :class:`TransactionManager`.

Each user call (``init_transactions``, ``send_offsets_to_transaction``,
``commit_transaction``, ``abort_transaction``) starts an operation in the
sender's task group (through the ``spawn`` it is given) and waits for its
:class:`TxnOperation` up to its
timeout. The operation goes on when the caller stops waiting, so that calling
the same method again waits for the same requests (Java's cached results);
the manager refuses any other operation meanwhile.

One coordinator request is in flight at a time (``_lock``), in the order the
operations asked, which keeps EndTxn after the AddOffsetsToTxn and
TxnOffsetCommit of the same transaction. AddPartitionsToTxn is started at a
pass of the sender (:meth:`TransactionRunner.before_sender_pass`) when records
were written to partitions not in the transaction yet; their batches wait
(muted) until the coordinator added them, and the sender is woken then.

Requests are sent over the client's coordinator connection to the
transaction coordinator (FindCoordinator key type 1), or to the group
coordinator for TxnOffsetCommit; answers the manager reads as retriable are
sent again after ``retry.backoff.ms``..``retry.backoff.max.ms``, finding the
coordinator again first when it moved, as long as the operation runs.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

import anyio

from kafkette.client.backoff import backoff_ms
from kafkette.client.client import KafkaClient
from kafkette.client.config import ProducerConfig
from kafkette.client.connection import BrokerConnection
from kafkette.errors import (
    GroupAuthorizationFailedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    RetriableError,
)
from kafkette.producer.accumulator import RecordAccumulator
from kafkette.producer.idempotence import IdempotenceState
from kafkette.producer.transactions import (
    CLIENT_ADD_PARTITIONS_MAX_VERSION,
    CLIENT_END_TXN_MAX_VERSION,
    Action,
    Pending,
    ProducerTxnState,
    Reply,
    TransactionAbortedError,
    TransactionManager,
    partition_codes,
)
from kafkette.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafkette.protocol.schema import Request, Response
from kafkette.structs import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

logger = logging.getLogger("kafkette.producer")

TRANSACTION_KEY = 1
GROUP_KEY = 0

Build = Callable[[BrokerConnection], "tuple[Request, int] | None"]
Answer = Callable[[Response, int], Reply]
Task = Callable[[], Coroutine[Any, Any, None]]
Spawn = Callable[[Task], None]
"""Runs a task in the sender's task group (cancelled when the producer is aborted)."""


class TxnOperation:
    """The outcome of one transactional operation, awaited by one or more calls."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.finished = anyio.Event()
        self.error: BaseException | None = None
        self.scope: anyio.CancelScope | None = None

    def succeed(self) -> None:
        self.finished.set()

    def fail(self, error: BaseException) -> None:
        if not self.finished.is_set():
            self.error = error
            self.finished.set()

    def cancel(self) -> None:
        if self.scope is not None:
            self.scope.cancel()


class TransactionRunner:
    """Runs the :class:`TransactionManager`'s requests for one producer."""

    def __init__(
        self,
        manager: TransactionManager,
        client: KafkaClient,
        accumulator: RecordAccumulator,
        config: ProducerConfig,
        idempotence: IdempotenceState,
        *,
        spawn: Spawn,
        wakeup: Callable[[], None],
        rng: random.Random | None = None,
    ) -> None:
        self.manager = manager
        self.client = client
        self.accumulator = accumulator
        self.config = config
        self.idempotence = idempotence
        self.rng = rng or random.Random()
        self._spawn_task = spawn
        self._wakeup = wakeup
        self._lock = anyio.Lock()
        self.adding_busy = False
        self._request_connection: BrokerConnection | None = None
        """The connection of the coordinator request in flight (one at a time)."""

    # ---- user calls (event loop)

    async def init_transactions(self, timeout_s: float | None) -> None:
        """InitProducerId with the transactional id; READY when it succeeds."""
        manager = self.manager
        pending = manager.pending
        if (
            pending is not None
            and not pending.acked
            and pending.state is ProducerTxnState.INITIALIZING
        ):
            op = pending.handle
        else:
            abandoned = pending.handle if pending is not None and not pending.acked else None
            if manager.begin_init() and abandoned is not None:
                abandoned.cancel()
                abandoned.fail(KafkaError(f"{abandoned.name} was abandoned by init_transactions"))
                await self._drop_coordinator_connection()
            op = self._start(
                "init_transactions", ProducerTxnState.INITIALIZING, self._run_init, False
            )
        await self._wait(op, timeout_s)

    async def _drop_coordinator_connection(self) -> None:
        """Close the connection of the abandoned request and forget the coordinator:
        our next requests go over a new connection, not queued behind it."""
        connection, self._request_connection = self._request_connection, None
        if connection is not None:
            await connection.aclose()
        self.client.invalidate_coordinator(self.manager.transactional_id, TRANSACTION_KEY)

    async def send_offsets(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: ConsumerGroupMetadata,
        timeout_s: float | None,
    ) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group coordinator."""
        commits = self.manager.begin_offsets(offsets, group_metadata)
        if not commits:
            return
        op = TxnOperation("send_offsets_to_transaction")
        self._spawn(op, self._run_offsets, op, commits, group_metadata)
        await self._wait(op, timeout_s)

    async def commit(self, timeout_s: float | None) -> None:
        """Flush, then EndTxn(commit)."""
        pending = self.manager.cached(ProducerTxnState.COMMITTING_TRANSACTION, "commit_transaction")
        if pending is not None:
            op = pending.handle
        else:
            self.manager.begin_commit()
            op = self._start(
                "commit_transaction", ProducerTxnState.COMMITTING_TRANSACTION, self._run_end
            )
        await self._wait(op, timeout_s)

    async def abort(self, timeout_s: float | None) -> None:
        """Drop queued records, wait for those in flight, then EndTxn(abort)."""
        pending = self.manager.cached(ProducerTxnState.ABORTING_TRANSACTION, "abort_transaction")
        if pending is not None:
            op = pending.handle
        else:
            self.manager.begin_abort()
            self.drop_queued(TransactionAbortedError())
            op = self._start(
                "abort_transaction", ProducerTxnState.ABORTING_TRANSACTION, self._run_end
            )
        await self._wait(op, timeout_s)

    def drop_queued(self, error: BaseException) -> None:
        """Fail the records not sent yet: their transaction is lost (Java's
        abortUndrainedBatches). A batch that was sent before (it waits for a retry)
        leaves a gap in its partition's sequences: the abort then bumps the epoch."""
        for batch in self.accumulator.abort(error):
            if batch.base_sequence >= 0 and batch.producer_epoch == self.idempotence.epoch:
                self.idempotence.bump_needed = True

    def _start(
        self,
        name: str,
        state: ProducerTxnState,
        run: Callable[..., Coroutine[Any, Any, None]],
        *args: Any,
    ) -> TxnOperation:
        op = TxnOperation(name)
        self.manager.pending = Pending(state, name, op)
        self._spawn(op, run, op, *args)
        return op

    def _spawn(
        self, op: TxnOperation, run: Callable[..., Coroutine[Any, Any, None]], *args: Any
    ) -> None:
        async def guarded() -> None:
            with anyio.CancelScope() as scope:
                op.scope = scope
                try:
                    await run(*args)
                except KafkaError as exc:
                    op.fail(exc)
                except Exception as exc:  # a bug: report it rather than hang the caller
                    logger.exception("transactional operation %s failed", op.name)
                    op.fail(exc)
                finally:  # cancelled: the producer closed, or its sender failed
                    manager = self.manager
                    if manager.has_fatal_error and manager.last_error is not None:
                        op.fail(manager.last_error)
                    op.fail(KafkaConnectionError(f"{op.name}: the producer was closed"))

        self._spawn_task(guarded)

    async def _wait(self, op: TxnOperation, timeout_s: float | None) -> None:
        with anyio.move_on_after(timeout_s):
            await op.finished.wait()
        if not op.finished.is_set():
            raise KafkaTimeoutError(
                f"{op.name} did not complete within {timeout_s}s; call it again to keep "
                f"waiting for the same request"
            )
        pending = self.manager.pending
        if pending is not None and pending.handle is op:
            pending.acked = True
        if op.error is not None:
            raise op.error

    # ---- operations (background tasks)

    async def _run_init(self, op: TxnOperation, bump: bool) -> None:
        async with self._lock:
            reply = await self._init_producer_id(bump)
        self._finish(op, reply)

    async def _init_producer_id(self, bump: bool) -> Reply:
        manager = self.manager

        def build(connection: BrokerConnection) -> tuple[Request, int]:
            return manager.init_request(bump=bump), connection.version_for(InitProducerIdRequest)

        def answer(response: Response, version: int) -> Reply:
            assert isinstance(response, InitProducerIdResponse)
            return manager.on_init_producer_id(
                response.error_code,
                response.producer_id,
                response.producer_epoch,
                version=version,
                bump=bump,
            )

        reply = await self._exchange(build, answer)
        if reply.action is Action.DONE:
            self.idempotence.reset(manager.producer_id, manager.epoch)
        return reply

    async def _run_offsets(
        self,
        op: TxnOperation,
        commits: dict[TopicPartition, OffsetAndMetadata],
        group_metadata: ConsumerGroupMetadata,
    ) -> None:
        manager = self.manager
        group_id = group_metadata.group_id
        async with self._lock:

            def build_add(connection: BrokerConnection) -> tuple[Request, int]:
                return (
                    manager.add_offsets_request(group_id),
                    connection.version_for(AddOffsetsToTxnRequest),
                )

            def answer_add(response: Response, version: int) -> Reply:
                assert isinstance(response, AddOffsetsToTxnResponse)
                return manager.on_add_offsets(response.error_code, group_id)

            reply = await self._exchange(build_add, answer_add)
            if reply.action is Action.DONE:
                pending = dict(commits)

                def build_commit(connection: BrokerConnection) -> tuple[Request, int]:
                    version = connection.version_for(TxnOffsetCommitRequest)
                    return (
                        manager.txn_offset_commit_request(pending, group_metadata, version),
                        version,
                    )

                def answer_commit(response: Response, version: int) -> Reply:
                    assert isinstance(response, TxnOffsetCommitResponse)
                    codes = {
                        TopicPartition(t.name, p.partition_index): p.error_code
                        for t in response.topics
                        for p in t.partitions
                    }
                    return manager.on_txn_offset_commit(codes, pending)

                reply = await self._exchange(
                    build_commit, answer_commit, key=group_id, key_type=GROUP_KEY
                )
        self._finish(op, reply)

    async def _run_end(self, op: TxnOperation) -> None:
        manager = self.manager
        committing = manager.state is ProducerTxnState.COMMITTING_TRANSACTION
        await self._wait_for_batches()
        if committing and manager.has_error:
            # a batch failed: the transaction can only be aborted now
            assert manager.last_error is not None
            op.fail(manager.last_error)
            return
        if manager.has_fatal_error:
            assert manager.last_error is not None
            op.fail(manager.last_error)
            return
        async with self._lock:
            reply = Reply(Action.DONE)
            if manager.end_txn_request() is not None:

                def build(connection: BrokerConnection) -> tuple[Request, int]:
                    request = manager.end_txn_request()
                    assert request is not None
                    return request, connection.version_for(
                        EndTxnRequest, CLIENT_END_TXN_MAX_VERSION
                    )

                def answer(response: Response, version: int) -> Reply:
                    assert isinstance(response, EndTxnResponse)
                    return manager.on_end_txn(response.error_code)

                reply = await self._exchange(build, answer)
            if reply.action is Action.DONE:
                if self.idempotence.bump_needed and manager.bump_supported:
                    # a batch whose sequence never reached the log: start again from 0
                    manager.epoch_bump_required = True
                manager.complete()
                if manager.state is ProducerTxnState.INITIALIZING:
                    reply = await self._init_producer_id(bump=True)
        self._finish(op, reply)

    async def _wait_for_batches(self) -> None:
        """Every batch of the transaction acknowledged or failed (a flush)."""
        accumulator = self.accumulator
        results = accumulator.begin_flush()
        try:
            for result in results:
                await result.wait_async()
        finally:
            accumulator.end_flush()

    def _finish(self, op: TxnOperation, reply: Reply) -> None:
        if reply.action is Action.DONE:
            op.succeed()
        else:
            op.fail(reply.error or KafkaError(f"{op.name} failed"))

    # ---- at each pass of the sender

    def before_sender_pass(self) -> None:
        """Drop what cannot be sent any more; start AddPartitionsToTxn when needed.

        In an abortable or fatal error state, or aborting, records not sent yet
        fail at once (Java's abortUndrainedBatches): their transaction is lost.
        """
        manager = self.manager
        if (
            manager.state
            in (
                ProducerTxnState.ABORTABLE_ERROR,
                ProducerTxnState.ABORTING_TRANSACTION,
                ProducerTxnState.FATAL_ERROR,
            )
            and self.accumulator.queued()
        ):
            self.drop_queued(manager.last_error or TransactionAbortedError())
        if manager.new_partitions and not self.adding_busy and not manager.adding:
            self.adding_busy = True
            self._spawn_task(self.add_partitions)

    # ---- AddPartitionsToTxn

    async def add_partitions(self) -> None:
        """Add the partitions written to since the last AddPartitionsToTxn."""
        manager = self.manager
        try:
            async with self._lock:

                def build(connection: BrokerConnection) -> tuple[Request, int] | None:
                    version = connection.version_for(
                        AddPartitionsToTxnRequest, CLIENT_ADD_PARTITIONS_MAX_VERSION
                    )
                    request = manager.take_partitions(version)
                    return None if request is None else (request, version)

                def answer(response: Response, version: int) -> Reply:
                    assert isinstance(response, AddPartitionsToTxnResponse)
                    if response.error_code:
                        codes = dict.fromkeys(manager.adding, response.error_code)
                    else:
                        codes = partition_codes(response.results_by_topic_v3_and_below)
                    self._last_add_code = next((c for c in codes.values() if c), 0)
                    return manager.on_add_partitions(codes)

                reply = await self._exchange(build, answer, add_partitions=True)
                if reply.action is Action.FAILED:
                    logger.info("adding partitions to the transaction failed: %s", reply.error)
        finally:
            self.adding_busy = False
            self._wakeup()

    _last_add_code = 0

    # ---- one request, retried

    async def _exchange(
        self,
        build: Build,
        answer: Answer,
        *,
        key: str | None = None,
        key_type: int = TRANSACTION_KEY,
        add_partitions: bool = False,
    ) -> Reply:
        """Send what ``build`` makes to the coordinator of ``key`` until ``answer`` is final."""
        key = self.manager.transactional_id if key is None else key
        client = self.client
        attempt = 0
        while True:
            if self.manager.has_fatal_error:
                return Reply(Action.FAILED, self.manager.last_error)
            try:
                node = await client.coordinator(key, key_type)
                connection = await client.coordinator_connection(node)
                built = build(connection)
                if built is None:
                    return Reply(Action.DONE)
                request, version = built
                self._request_connection = connection
                try:
                    response = await connection.request(request, version=version)
                finally:
                    self._request_connection = None
                assert response is not None
                reply = answer(response, version)
            except (KafkaConnectionError, KafkaTimeoutError, RetriableError) as exc:
                # an answer that never came (or a coordinator not found yet): the same
                # request again, to a coordinator found again
                logger.info("transactional request to the coordinator of %r: %s", key, exc)
                if add_partitions:
                    self.manager.requeue_partitions()
                reply = Reply(Action.FIND_COORDINATOR)
            except KafkaError as exc:  # FindCoordinator refused: authorization...
                if key_type == GROUP_KEY and isinstance(exc, GroupAuthorizationFailedError):
                    return self.manager.abortable(exc)
                return self.manager.fatal(exc)
            if reply.action in (Action.DONE, Action.FAILED):
                return reply
            if reply.action is Action.FIND_COORDINATOR:
                client.invalidate_coordinator(key, key_type)
            wait = backoff_ms(
                attempt, self.config.retry_backoff_ms, self.config.retry_backoff_max_ms, self.rng
            )
            if add_partitions:
                wait = self.manager.retry_backoff_ms(self._last_add_code, wait)
            attempt += 1
            await anyio.sleep(wait / 1000)


async def end_open_transaction(runner: TransactionRunner) -> None:
    """On close: abort an open transaction, or wait for the commit or abort under way
    (Java's producer aborts an incomplete transaction when it shuts down)."""
    manager = runner.manager
    pending = manager.pending
    try:
        if (
            pending is not None
            and not pending.acked
            and pending.state
            in (ProducerTxnState.COMMITTING_TRANSACTION, ProducerTxnState.ABORTING_TRANSACTION)
        ):
            await pending.handle.finished.wait()
        elif manager.state in (ProducerTxnState.IN_TRANSACTION, ProducerTxnState.ABORTABLE_ERROR):
            logger.info("aborting the open transaction as the producer closes")
            await runner.abort(None)
    except KafkaError as exc:
        logger.info("ending the open transaction on close failed: %s", exc)
