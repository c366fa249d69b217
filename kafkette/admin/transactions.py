"""Transaction operations of :class:`~kafkette.admin.AsyncAdminClient`.

- :meth:`~TransactionOperations.list_transactions` asks every broker
  (ListTransactions), as each knows only the transactional ids it
  coordinates; a broker that fails is in the result's ``errors``.
- :meth:`~TransactionOperations.describe_transactions` asks each id's
  transaction coordinator (FindCoordinator key type 1, DescribeTransactions),
  finding it again and retrying while it is loading or elsewhere, as for
  groups; results are per id.
- :meth:`~TransactionOperations.describe_producers` asks each partition's
  leader (DescribeProducers) for the producers it remembers; results are per
  partition.
- :meth:`~TransactionOperations.abort_transaction` has a partition's leader
  write an ABORT marker for one producer (WriteTxnMarkers), as Kafka's
  ``Admin.abortTransaction``: the way out of a hanging transaction.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar

import anyio

from kafkette.admin.groups import GroupOperations, _Retry
from kafkette.admin.txn_types import (
    AbortTransactionSpec,
    ProducerState,
    TransactionDescription,
    TransactionListing,
    TransactionListings,
    TransactionState,
)
from kafkette.admin.types import Outcome, Results
from kafkette.client.connection import BrokerConnection
from kafkette.consumer.timeouts import timeout_in_ms
from kafkette.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotCoordinatorError,
    UnsupportedVersionError,
    make_error,
)
from kafkette.protocol.messages import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafkette.protocol.messages.describe_producers_request import TopicRequest
from kafkette.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
)
from kafkette.protocol.schema import Request, Response
from kafkette.structs import TopicPartition

T = TypeVar("T")

TRANSACTION_KEY = 1
_MOVED = frozenset({NotCoordinatorError.code, CoordinatorNotAvailableError.code})
_RETRY = _MOVED | {CoordinatorLoadInProgressError.code}
_FIRST_DURATION_FILTER_VERSION = 1
"""ListTransactions filters by duration from v1."""


class TransactionOperations(GroupOperations):
    """The transaction half of the admin client (mixed into AsyncAdminClient)."""

    if TYPE_CHECKING:

        async def _by_leader(
            self,
            partitions: list[TopicPartition],
            build: Callable[[list[TopicPartition]], Request],
            parse: Callable[[Response], Mapping[TopicPartition, tuple[int, T]]],
            timeout_ms: float | None,
        ) -> Results[TopicPartition, T]: ...

    # ---- listing

    async def list_transactions(
        self,
        *,
        states: Iterable[TransactionState | str] | None = None,
        producer_ids: Iterable[int] | None = None,
        duration_ms: int | None = None,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> TransactionListings:
        """Transactional ids of every broker, optionally only those in ``states``, of
        ``producer_ids``, or with a transaction open longer than ``duration_ms`` (v1+)."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        wanted_states = [
            (TransactionState.parse(s) if isinstance(s, str) else s).value for s in states or ()
        ]
        wanted_ids = list(producer_ids or ())
        deadline = anyio.current_time() + self._timeout_s(timeout_ms)
        snapshot = await self._until_done(
            lambda: self._client.refresh_metadata([]), "list transactions", deadline
        )
        listings: list[TransactionListing] = []
        errors: dict[int, KafkaError] = {}
        for node in sorted(snapshot.brokers):
            attempt = functools.partial(
                self._list_transactions, node, wanted_states, wanted_ids, duration_ms
            )
            try:
                listings += await self._until_done(
                    attempt, f"list transactions of broker {node}", deadline
                )
            except KafkaError as exc:
                errors[node] = exc
        return TransactionListings(
            tuple(sorted(listings, key=lambda t: (t.transactional_id, t.coordinator))), errors
        )

    async def _list_transactions(
        self, node: int, states: list[str], producer_ids: list[int], duration_ms: int | None
    ) -> list[TransactionListing]:
        try:
            connection = await self._client.connection(node)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            raise _Retry(str(exc)) from exc
        version = connection.version_for(ListTransactionsRequest)
        if duration_ms is not None and version < _FIRST_DURATION_FILTER_VERSION:
            raise UnsupportedVersionError(
                f"broker {node} cannot filter transactions by duration (ListTransactions v0)"
            )
        request = ListTransactionsRequest(
            state_filters=states,
            producer_id_filters=producer_ids,
            duration_filter=-1 if duration_ms is None else duration_ms,
        )
        response = await connection.request(request, version=version)
        assert isinstance(response, ListTransactionsResponse)
        if response.error_code in _RETRY:
            raise _Retry(str(make_error(response.error_code, f"broker {node}")))
        if response.error_code:
            raise make_error(response.error_code, f"listing the transactions of broker {node}")
        return [
            TransactionListing(
                t.transactional_id, t.producer_id, TransactionState.parse(t.transaction_state), node
            )
            for t in response.transaction_states
        ]

    # ---- describe

    async def describe_transactions(
        self,
        transactional_ids: Iterable[str],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[str, TransactionDescription]:
        """State, producer id and epoch, timeout, start and partitions of each id's
        transaction; an id the coordinator does not know fails with
        TRANSACTIONAL_ID_NOT_FOUND."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)
        deadline = anyio.current_time() + self._timeout_s(timeout_ms)
        outcomes: dict[str, Outcome[TransactionDescription]] = {}
        for transactional_id in dict.fromkeys(transactional_ids):
            try:
                value = await self._until_done(
                    functools.partial(self._describe_transaction, transactional_id),
                    f"describe transaction {transactional_id!r}",
                    deadline,
                )
            except KafkaError as exc:
                outcomes[transactional_id] = Outcome(error=exc)
            else:
                outcomes[transactional_id] = Outcome(value)
        return Results(outcomes)

    async def _describe_transaction(self, transactional_id: str) -> TransactionDescription:
        client = self._client
        node = await client.coordinator(transactional_id, TRANSACTION_KEY)
        try:
            connection: BrokerConnection = await client.coordinator_connection(node)
            response = await connection.request(
                DescribeTransactionsRequest(transactional_ids=[transactional_id])
            )
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            client.invalidate_coordinator(transactional_id, TRANSACTION_KEY)
            raise _Retry(str(exc)) from exc
        assert isinstance(response, DescribeTransactionsResponse)
        found = next(
            (s for s in response.transaction_states if s.transactional_id == transactional_id),
            None,
        )
        if found is None:
            raise KafkaError(f"DescribeTransactions answered nothing for {transactional_id!r}")
        if found.error_code in _MOVED:
            client.invalidate_coordinator(transactional_id, TRANSACTION_KEY)
        if found.error_code in _RETRY:
            raise _Retry(str(make_error(found.error_code, transactional_id)))
        if found.error_code:
            raise make_error(found.error_code, f"describing transaction {transactional_id!r}")
        return TransactionDescription(
            coordinator_id=node,
            state=TransactionState.parse(found.transaction_state),
            producer_id=found.producer_id,
            producer_epoch=found.producer_epoch,
            transaction_timeout_ms=found.transaction_timeout_ms,
            transaction_start_time_ms=None
            if found.transaction_start_time_ms < 0
            else found.transaction_start_time_ms,
            topic_partitions=frozenset(
                TopicPartition(topic.topic, p) for topic in found.topics for p in topic.partitions
            ),
        )

    # ---- producers

    async def describe_producers(
        self,
        partitions: Iterable[TopicPartition],
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, tuple[ProducerState, ...]]:
        """The producers each partition's leader remembers (id, epoch, last sequence and
        timestamp, open transaction's first offset), sorted by producer id."""

        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)

        def build(group: list[TopicPartition]) -> Request:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for tp in group:
                by_topic[tp.topic].append(tp.partition)
            return DescribeProducersRequest(
                topics=[TopicRequest(t, ps) for t, ps in by_topic.items()]
            )

        def parse(
            response: Response,
        ) -> dict[TopicPartition, tuple[int, tuple[ProducerState, ...]]]:
            assert isinstance(response, DescribeProducersResponse)
            return {
                TopicPartition(t.name, p.partition_index): (
                    p.error_code,
                    tuple(
                        sorted(
                            (
                                ProducerState(
                                    s.producer_id,
                                    s.producer_epoch,
                                    s.last_sequence,
                                    s.last_timestamp,
                                    None if s.coordinator_epoch < 0 else s.coordinator_epoch,
                                    None
                                    if s.current_txn_start_offset < 0
                                    else s.current_txn_start_offset,
                                )
                                for s in p.active_producers
                            ),
                            key=lambda s: s.producer_id,
                        )
                    ),
                )
                for t in response.topics
                for p in t.partitions
            }

        return await self._by_leader(list(partitions), build, parse, timeout_ms)

    # ---- ending

    async def abort_transaction(
        self,
        spec: AbortTransactionSpec,
        *,
        timeout_ms: float | None = None,
        timeout: float | None = None,
    ) -> Results[TopicPartition, None]:
        """Abort the producer's transaction in one partition: its leader appends an ABORT
        marker, so a hanging transaction stops holding back the last stable offset.

        Take the producer id, epoch and coordinator epoch from
        :meth:`describe_producers`. A stale epoch fails with
        :class:`~kafkette.errors.InvalidProducerEpochError` or
        :class:`~kafkette.errors.TransactionCoordinatorFencedError`; the marker of a
        producer with no open transaction there ends nothing. Meant for transactions
        their coordinator lost track of: a live producer's transaction is aborted in
        this partition only."""
        timeout_ms = timeout_in_ms(None, timeout, timeout_ms)

        def build(group: list[TopicPartition]) -> Request:
            return WriteTxnMarkersRequest(
                markers=[
                    WritableTxnMarker(
                        producer_id=spec.producer_id,
                        producer_epoch=spec.producer_epoch,
                        transaction_result=False,
                        topics=[WritableTxnMarkerTopic(tp.topic, [tp.partition]) for tp in group],
                        coordinator_epoch=spec.coordinator_epoch,
                    )
                ]
            )

        def parse(response: Response) -> dict[TopicPartition, tuple[int, None]]:
            assert isinstance(response, WriteTxnMarkersResponse)
            return {
                TopicPartition(t.name, p.partition_index): (p.error_code, None)
                for marker in response.markers
                for t in marker.topics
                for p in t.partitions
            }

        return await self._by_leader([spec.topic_partition], build, parse, timeout_ms)


__all__ = ["TransactionOperations"]
