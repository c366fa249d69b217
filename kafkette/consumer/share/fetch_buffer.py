"""Records a share consumer fetched and did not hand out yet: no I/O.

Java's ``ShareConsumer`` fetches in the background and holds the answers in a fetch
buffer until the application polls; :class:`ShareFetchBuffer` is that buffer. A leader
is not sent another ShareFetch while one is out to it or its answer waits here (Java's
``nodesWithPendingRequests``), and the consumer asks for one only when a poll found
nothing here, so at most one answer per leader is held, its records acquired from the
moment the broker answered.

Records waiting here are not the application's yet: they are booked as delivered
(:meth:`~kafkette.consumer.share.acknowledgements.Acknowledgements.delivered`) only when
a poll takes them, so implicit mode never accepts a record nobody saw. Records of a
session that ends (closed, lost, unsubscribed) are dropped: the broker gave them back.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kafkette.consumer.share.record import ShareConsumerRecord
from kafkette.structs import TopicPartition


@attrs.define
class Fetched:
    """One leader's answer: its records and, per partition, the acquired offsets that
    hold a record and those that hold none (gaps: control records, compacted away)."""

    node: int
    records: list[ShareConsumerRecord]
    offsets: dict[TopicPartition, tuple[list[Sequence[int]], list[int]]]
    """Per partition: the offsets of its records (in runs) and its gaps."""


class ShareFetchBuffer:
    """Answers waiting for ``poll`` and the leaders a fetch is out to."""

    def __init__(self) -> None:
        self._waiting: list[Fetched] = []
        self.in_flight: set[int] = set()
        """Leaders with a ShareFetch out."""

    def busy(self, node: int) -> bool:
        """Whether ``node`` must not be fetched from now: a fetch to it is out, or its
        records wait here."""
        return node in self.in_flight or any(f.node == node for f in self._waiting)

    def add(self, fetched: Fetched) -> None:
        """An answer came: its records wait for a poll (an empty answer is not kept)."""
        if fetched.records or fetched.offsets:
            self._waiting.append(fetched)

    def take(self) -> list[Fetched]:
        """Everything waiting, oldest first; the buffer is then empty."""
        waiting, self._waiting = self._waiting, []
        return waiting

    def drop(self, nodes: set[int] | None = None) -> None:
        """Forget what ``nodes`` (None: every leader) answered: their sessions ended."""
        if nodes is None:
            self._waiting = []
        else:
            self._waiting = [f for f in self._waiting if f.node not in nodes]

    def __bool__(self) -> bool:
        return bool(self._waiting)
