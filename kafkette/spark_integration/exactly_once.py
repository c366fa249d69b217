"""Exactly-once writes of one Spark partition of one micro-batch, with Kafka transactions.

Each Spark partition ``p`` of a batch writes in a transaction of its own
``transactional.id`` (``prefix + "-" + p``), the same id for every attempt of
that partition in every batch. An attempt:

1. ``init_transactions()``: fences every earlier producer of that id (a zombie
   attempt's later sends and commit fail) and ends its open transaction;
2. reads its *marker*: the committed offset of the consumer group named after
   the ``transactional.id``, on partition 0 of the marker topic (the output
   topic), read with ``require_stable`` so that a commit in flight is waited
   for. Its metadata is JSON ``{"query": ..., "batch": ..., "rows": ...}``;
3. if the marker's batch is this batch or a later one, the partition was
   written already (by an earlier attempt, or before a driver crash): skip;
4. otherwise begin a transaction, send the rows, commit the new marker in the
   same transaction (``send_offsets_to_transaction``) and commit.

So the rows and the marker become visible together, to ``read_committed``
readers, or not at all. This needs the rows of a partition of a batch to be
the same in every attempt (a deterministic repartition, a replayable source)
and each partition's transaction to finish within ``transaction.timeout.ms``.
A marker written by another query (the checkpoint was deleted and the query
id changed) is an error: otherwise every batch would be skipped silently.

:class:`PartitionPlan` decides (plain, no I/O); :func:`write_partition` runs an
attempt through a :class:`TransactionalSession`; :class:`KafketteSession` is
that session over kafkette's producer and consumer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

import attrs

from kafkette.client.config import ClientConfig

Record = tuple[Any, ...]
"""``(topic, value, key, headers, partition, timestamp_ms)``, as :mod:`.sink_columns` makes them."""


class MarkerError(RuntimeError):
    """A marker that this query cannot use: written by another query, or unreadable."""


@attrs.frozen
class Marker:
    """The last batch a ``transactional.id`` committed: which query, which batch, how many rows."""

    query: str
    batch: int
    rows: int

    def to_metadata(self) -> str:
        """The marker as the committed offset's metadata text."""
        return json.dumps({"query": self.query, "batch": self.batch, "rows": self.rows})

    @classmethod
    def from_metadata(cls, text: str, group: str) -> Marker:
        """Parse a committed offset's metadata; :class:`MarkerError` if it is no marker."""
        try:
            fields = json.loads(text)
            marker = cls(str(fields["query"]), int(fields["batch"]), int(fields["rows"]))
        except (ValueError, TypeError, KeyError):
            raise MarkerError(
                f"group {group!r} has a committed offset whose metadata is not an exactly-once "
                f"marker: {text!r}; is another application using this transactional id?"
            ) from None
        return marker


@attrs.frozen
class PartitionPlan:
    """What one attempt at one Spark partition of one batch must do."""

    query: str
    batch: int
    transactional_id: str

    def should_write(self, marker: Marker | None) -> bool:
        """True: write the partition; False: an earlier attempt committed it already."""
        if marker is None:
            return True
        if marker.query != self.query:
            raise MarkerError(
                f"transactional id {self.transactional_id!r} was last used by streaming query "
                f"{marker.query} (batch {marker.batch}), not by this query {self.query}. "
                "A new query (a deleted or new checkpoint) needs a transactional id prefix of its "
                "own (transactional_id_prefix / the transactionalIdPrefix option), or the old "
                "query's marker groups deleted."
            )
        return marker.batch < self.batch

    def marker(self, rows: int) -> Marker:
        """The marker this attempt commits along with its ``rows``."""
        return Marker(self.query, self.batch, rows)


class TransactionalSession(Protocol):
    """The Kafka side of one attempt (the methods are called in this order)."""

    def init_transactions(self) -> None:
        """Fence earlier producers of the transactional id; end their open transaction."""

    def read_marker(self) -> Marker | None:
        """The committed marker (stable: no commit in flight), None if there is none."""

    def begin(self) -> None:
        """Open a transaction."""

    def send(self, record: Record) -> None:
        """Send one record in the open transaction."""

    def commit(self, marker: Marker) -> None:
        """Commit ``marker`` in the open transaction, then the transaction."""


@attrs.frozen
class PartitionOutcome:
    """What an attempt did: wrote ``rows`` rows, or skipped a partition already written."""

    written: bool
    rows: int


def write_partition(
    session: TransactionalSession, plan: PartitionPlan, records: Iterable[Record]
) -> PartitionOutcome:
    """Run one attempt (see the module docstring). An empty partition writes nothing.

    The records are drained in every case (a skipped partition too), so the
    caller's input is always consumed.
    """
    it = iter(records)
    first = next(it, None)
    if first is None:
        return PartitionOutcome(written=False, rows=0)
    session.init_transactions()
    if not plan.should_write(session.read_marker()):
        for _ in it:
            pass
        return PartitionOutcome(written=False, rows=0)
    session.begin()
    rows = 0
    for record in _chain(first, it):
        session.send(record)
        rows += 1
    session.commit(plan.marker(rows))
    return PartitionOutcome(written=True, rows=rows)


def _chain(first: Record, rest: Iterator[Record]) -> Iterator[Record]:
    yield first
    yield from rest


def _common_client_settings(settings: Mapping[str, str]) -> dict[str, str]:
    """The settings every client takes (bootstrap, security, timeouts...), for the marker reader."""
    common = ClientConfig.kafka_names()
    return {k: v for k, v in settings.items() if k in common}


class KafketteSession:
    """:class:`TransactionalSession` over a kafkette Producer (and a Consumer for the marker).

    ``settings``: producer settings (``bootstrap.servers`` and the user's
    ``kafka.*`` ones); ``marker_topic``: the topic whose partition 0 holds
    the marker. Clients are opened by :meth:`init_transactions`; call
    :meth:`close` in every case.
    """

    def __init__(
        self, settings: Mapping[str, str], transactional_id: str, marker_topic: str
    ) -> None:
        self.settings = dict(settings)
        self.transactional_id = transactional_id
        self.marker_topic = marker_topic
        self._producer: Any = None

    def init_transactions(self) -> None:
        from kafkette import Producer

        self._producer = Producer({**self.settings, "transactional.id": self.transactional_id})
        self._producer.init_transactions()

    def read_marker(self) -> Marker | None:
        from kafkette import Consumer, TopicPartition

        partition = TopicPartition(self.marker_topic, 0)
        settings = {
            **_common_client_settings(self.settings),
            "group.id": self.transactional_id,
            "enable.auto.commit": "false",
        }
        with Consumer(settings) as consumer:
            # the consumer fetches with RequireStable and waits out a commit in flight
            committed = consumer.committed([partition]).get(partition)
        if committed is None:
            return None
        return Marker.from_metadata(committed.metadata, self.transactional_id)

    def begin(self) -> None:
        self._producer.begin_transaction()

    def send(self, record: Record) -> None:
        topic, value, key, headers, partition, timestamp = record
        self._producer.send(topic, value, key, headers, partition, timestamp)

    def commit(self, marker: Marker) -> None:
        from kafkette import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition

        self._producer.send_offsets_to_transaction(
            {
                TopicPartition(self.marker_topic, 0): OffsetAndMetadata(
                    marker.batch, marker.to_metadata()
                )
            },
            ConsumerGroupMetadata(self.transactional_id),
        )
        self._producer.commit_transaction()

    def close(self) -> None:
        """Close the producer (an open transaction is aborted)."""
        if self._producer is not None:
            producer, self._producer = self._producer, None
            producer.close()
