"""The records a share consumer holds and the acknowledgements it owes: no I/O.

:class:`Acknowledgements` is the client half of KIP-932's bargain, as Java's
``ShareFetch`` and ``ShareConsumeRequestManager`` keep it:

- ``poll`` hands out records (:meth:`Acknowledgements.delivered`); each is *unacknowledged*
  until the application acknowledges it. Offsets inside an acquired range that hold no
  record (control records, compacted away) are acknowledged as GAP at once.
- ``acknowledge(record, type)`` books the type; ACCEPT, RELEASE and REJECT settle the
  record, RENEW keeps it held (it may be acknowledged again later) and counts as an
  acknowledgement for the next poll's check.
- Implicit mode: the next poll, commit or close accepts every unacknowledged record
  (:meth:`Acknowledgements.accept_unacknowledged`). Explicit mode: a poll while records
  are unacknowledged is refused (Java's IllegalStateException).
- The booked acknowledgements leave with the next request to the partition's leader
  (:meth:`Acknowledgements.take`), as acknowledgement batches: consecutive offsets,
  one type for the whole range or one per offset. A ShareFetch, which goes out in the
  background, carries only what was booked before the last poll
  (:meth:`Acknowledgements.seal`, as Java hands them to its fetcher at poll); a commit
  or close sends everything booked.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from kafkette.consumer.share.record import AcknowledgeType
from kafkette.errors import IllegalStateError
from kafkette.structs import TopicPartition

GAP = 0
"""The acknowledge type of an offset that holds no record."""

AckBatch = tuple[int, int, list[int]]
"""(first offset, last offset, types): one type for the range, or one per offset."""


class Acknowledgements:
    """Held records and booked acknowledgements of one share consumer."""

    def __init__(self) -> None:
        self.unacknowledged: dict[TopicPartition, set[int]] = {}
        """Records handed out and not acknowledged yet."""
        self.held: dict[TopicPartition, set[int]] = {}
        """Records that may still be acknowledged: the unacknowledged and the renewed."""
        self.booked: dict[TopicPartition, dict[int, int]] = {}
        """Acknowledgements to send: offset -> type, per partition."""
        self.sealed: dict[TopicPartition, dict[int, int]] = {}
        """Acknowledgements booked before the last poll: the next ShareFetch takes them."""
        # The sync consumer books in the application's thread while the loop may take.
        self._lock = threading.Lock()

    def delivered(
        self, tp: TopicPartition, offsets: Iterable[int], gaps: Iterable[int] = ()
    ) -> None:
        """Records of ``tp`` handed out by a poll; ``gaps`` (acquired offsets without a
        record) are booked as GAP."""
        offsets = set(offsets)
        with self._lock:
            self.unacknowledged.setdefault(tp, set()).update(offsets)
            self.held.setdefault(tp, set()).update(offsets)
            for offset in gaps:
                self.booked.setdefault(tp, {})[offset] = GAP

    def acknowledge(self, tp: TopicPartition, offset: int, kind: AcknowledgeType) -> None:
        """Book ``kind`` for the held record at ``offset`` of ``tp``."""
        kind = AcknowledgeType(kind)
        with self._lock:
            held = self.held.get(tp)
            if held is None or offset not in held:
                raise IllegalStateError(
                    f"The record cannot be acknowledged: {tp} offset {offset} is not held by "
                    "this consumer (not delivered, already acknowledged, or its session ended)."
                )
            self.booked.setdefault(tp, {})[offset] = int(kind)
            self.unacknowledged[tp].discard(offset)
            if kind != AcknowledgeType.RENEW:
                held.discard(offset)

    def all_acknowledged(self) -> bool:
        """Whether every record handed out was acknowledged (RENEW counts)."""
        return not any(self.unacknowledged.values())

    def accept_unacknowledged(self) -> None:
        """Implicit mode: ACCEPT every record not acknowledged yet."""
        with self._lock:
            for tp, offsets in self.unacknowledged.items():
                if offsets:
                    self.booked.setdefault(tp, {}).update(
                        dict.fromkeys(offsets, int(AcknowledgeType.ACCEPT))
                    )
                    self.held[tp].difference_update(offsets)
                    offsets.clear()

    def pending(self) -> bool:
        """Whether acknowledgements are booked and not sent."""
        return any(self.booked.values()) or any(self.sealed.values())

    def seal(self) -> None:
        """A poll: what is booked so far goes with the next ShareFetches."""
        with self._lock:
            for tp, types in self.booked.items():
                if types:
                    self.sealed.setdefault(tp, {}).update(types)
            self.booked = {}

    def take(
        self, partitions: Iterable[TopicPartition], *, sealed_only: bool = False
    ) -> dict[TopicPartition, list[AckBatch]]:
        """The booked acknowledgements of ``partitions`` as batches, no longer booked;
        with ``sealed_only`` (a ShareFetch) those booked before the last poll only."""
        out: dict[TopicPartition, list[AckBatch]] = {}
        with self._lock:
            for tp in partitions:
                types = self.sealed.pop(tp, None) or {}
                if not sealed_only:
                    types.update(self.booked.pop(tp, {}))  # the later type wins
                if types:
                    out[tp] = batches(types)
        return out

    def waiting(self, *, sealed_only: bool = False) -> list[TopicPartition]:
        """The partitions with acknowledgements to send."""
        with self._lock:
            found = {tp for tp, types in self.sealed.items() if types}
            if not sealed_only:
                found.update(tp for tp, types in self.booked.items() if types)
        return list(found)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop what is held in ``partitions``: their share session ended, so the
        broker gave their records back."""
        with self._lock:
            for tp in partitions:
                self.unacknowledged.pop(tp, None)
                self.held.pop(tp, None)
                self.booked.pop(tp, None)
                self.sealed.pop(tp, None)


def batches(types: dict[int, int]) -> list[AckBatch]:
    """Offsets and their types as acknowledgement batches: consecutive offsets share a
    batch, which carries one type when all are alike, else one per offset."""
    offsets = sorted(types)
    if offsets and offsets[-1] - offsets[0] + 1 == len(offsets):  # one run: often one type
        kinds = set(types.values())
        if len(kinds) == 1:
            return [(offsets[0], offsets[-1], [kinds.pop()])]
    out: list[AckBatch] = []
    run: list[int] = []
    for offset in offsets:
        if run and run[-1] + 1 != offset:
            out.append(_batch(run, types))
            run = []
        run.append(offset)
    if run:
        out.append(_batch(run, types))
    return out


def _batch(run: list[int], types: dict[int, int]) -> AckBatch:
    kinds = [types[offset] for offset in run]
    if kinds.count(kinds[0]) == len(kinds):
        kinds = kinds[:1]
    return run[0], run[-1], kinds
