"""The words of a share partition's state (KIP-932), as Kafka spells them.

A record of a share partition is AVAILABLE (to be acquired), ACQUIRED (by one
member, until its acquisition lock expires), ACKNOWLEDGED (accepted) or ARCHIVED
(rejected, past the delivery-count limit, aborted, or a gap); the last two are
terminal. Only AVAILABLE, ACKNOWLEDGED and ARCHIVED are ever persisted: an
acquisition is not written, so a record in flight at a crash comes back as its
last written state (``RecordState`` ids are Kafka's, as in ``StateBatches``).
"""

from __future__ import annotations

import enum

import attrs


class RecordState(enum.IntEnum):
    """The state of one record (Kafka's ``RecordState`` ids)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    @property
    def terminal(self) -> bool:
        """ACKNOWLEDGED and ARCHIVED: the record is never delivered again."""
        return self in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class AcknowledgeType(enum.IntEnum):
    """An acknowledgement's type, as ShareFetch and ShareAcknowledge carry it.

    GAP marks offsets that hold no record (compacted away, control records);
    RENEW (ShareFetch/ShareAcknowledge v2, KIP-1222) extends the acquisition lock.
    """

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


@attrs.frozen
class AcquiredRecords:
    """A range of records acquired by one fetch, all with one delivery count
    (a ShareFetch response's ``AcquiredRecords`` entry)."""

    first_offset: int
    last_offset: int
    delivery_count: int


@attrs.frozen
class Acknowledgement:
    """One acknowledgement batch: one type for the whole range, or one per offset
    (a request's ``AcknowledgementBatches`` entry)."""

    first_offset: int
    last_offset: int
    types: tuple[int, ...]


@attrs.frozen
class StateBatch:
    """A range of records with one persisted state and delivery count
    (``StateBatches`` of WriteShareGroupState, ShareSnapshot and ShareUpdate)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


@attrs.frozen
class StateWrite:
    """What a change of a share partition asks to persist: its start offset and
    the ranges whose persisted state changed (a WriteShareGroupState partition)."""

    start_offset: int
    batches: tuple[StateBatch, ...]


def runs(states: dict[int, tuple[RecordState, int]]) -> tuple[StateBatch, ...]:
    """The offsets of ``states`` (offset -> (state, delivery count)) as batches:
    consecutive offsets with equal state and count share one batch."""
    spans: list[list[int]] = []  # [first, last, state, count]
    for offset in sorted(states):
        state, count = states[offset]
        if spans and spans[-1][1] + 1 == offset and spans[-1][2:] == [state, count]:
            spans[-1][1] = offset
        else:
            spans.append([offset, offset, state, count])
    return tuple(StateBatch(f, last, RecordState(st), c) for f, last, st, c in spans)
