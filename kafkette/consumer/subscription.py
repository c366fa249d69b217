"""Assignment state: which partitions the consumer reads, and where it is in each.

:class:`SubscriptionState` is plain state, no I/O: the assigned partitions,
each one's position (the offset of the next record the application gets), the
paused set, pending offset resets, and the partition's watermarks as last
seen in a fetch (for lag). The fetcher reads it to decide what to fetch; the
consumer's ``poll`` advances positions as it hands records out. The user
(``assign``) or the group's assignment drives :meth:`SubscriptionState.assign`.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from kafkette.errors import IllegalStateError
from kafkette.structs import TopicPartition

EARLIEST = "earliest"
LATEST = "latest"
NO_RESET = "none"


class NoOffsetForPartitionError(IllegalStateError):
    """A partition has no position and ``auto.offset.reset`` is ``none``
    (Java's NoOffsetForPartitionException): seek it before polling."""

    name = "NO_OFFSET_FOR_PARTITION"
    description = "The partition has no position and auto.offset.reset is none."


@attrs.define(slots=True, eq=False)
class PartitionState:
    """Where the consumer is in one assigned partition.

    ``position`` is None until it is known; ``reset`` is then the strategy
    that will resolve it (``earliest``/``latest``), or ``none``. A partition
    newly assigned to a consumer with a ``group.id`` looks up the group's
    committed offset first (``committed_first``), as Java's consumer does, and
    falls back to ``reset`` when there is none; a reset asked for later (out of
    range, ``seek_to_beginning``) does not. A partition ``revoking`` is about to leave
    in a rebalance, once the positions are committed: it is neither fetched nor read
    (Java's pending revocation).
    """

    position: int | None = None
    reset: str = LATEST
    committed_first: bool = False
    paused: bool = False
    revoking: bool = False
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    log_start_offset: int | None = None


class SubscriptionState:
    """The assigned partitions and their :class:`PartitionState`."""

    def __init__(self, default_reset: str = LATEST, *, committed_first: bool = False) -> None:
        self.default_reset = default_reset
        self.committed_first = committed_first
        """Whether new partitions look up the group's committed offset first (a group.id)."""
        self._states: dict[TopicPartition, PartitionState] = {}

    # ---- assignment

    def assign(self, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Replace the assignment; partitions kept keep their state. Returns the removed ones."""
        wanted = list(dict.fromkeys(partitions))
        for tp in wanted:
            if not isinstance(tp, TopicPartition):
                raise TypeError(f"expected a TopicPartition, got {tp!r}")
        removed = set(self._states) - set(wanted)
        self._states = {
            tp: self._states.get(tp)
            or PartitionState(reset=self.default_reset, committed_first=self.committed_first)
            for tp in wanted
        }
        return removed

    def assigned(self) -> set[TopicPartition]:
        return set(self._states)

    def topics(self) -> set[str]:
        return {tp.topic for tp in self._states}

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._states

    def get(self, tp: TopicPartition) -> PartitionState | None:
        """The partition's state, or None when it is not assigned."""
        return self._states.get(tp)

    def state(self, tp: TopicPartition) -> PartitionState:
        """The partition's state; raises IllegalStateError when it is not assigned."""
        state = self._states.get(tp)
        if state is None:
            raise IllegalStateError(f"partition {tp} is not assigned to this consumer")
        return state

    # ---- positions

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"cannot seek {tp} to negative offset {offset}")
        self.state(tp).position = offset

    def request_reset(self, tp: TopicPartition, strategy: str | None = None) -> None:
        """Forget the position; it is resolved again with ``strategy`` (default: the config's)."""
        state = self.state(tp)
        state.position = None
        state.reset = strategy or self.default_reset
        state.committed_first = False

    def awaiting_reset(self) -> dict[TopicPartition, str]:
        """Partitions without a position that a committed offset or their strategy may resolve."""
        return {
            tp: s.reset
            for tp, s in self._states.items()
            if s.position is None and (s.reset != NO_RESET or s.committed_first)
        }

    def awaiting_committed(self) -> list[TopicPartition]:
        """Partitions without a position whose group's committed offset is still to be read."""
        return [tp for tp, s in self._states.items() if s.position is None and s.committed_first]

    def missing_positions(self) -> list[TopicPartition]:
        """Partitions without a position that nothing can resolve (``none``, nothing committed)."""
        return [
            tp
            for tp, s in self._states.items()
            if s.position is None and s.reset == NO_RESET and not s.committed_first
        ]

    def fetchable(self) -> list[tuple[TopicPartition, PartitionState]]:
        """Assigned, not paused or revoking, with a position."""
        return [
            (tp, s)
            for tp, s in self._states.items()
            if not (s.paused or s.revoking) and s.position is not None
        ]

    def mark_revoking(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching and handing out records of ``partitions`` (and only those), which
        a rebalance takes away once their positions are committed."""
        going = set(partitions)
        for tp, state in self._states.items():
            state.revoking = tp in going

    # ---- pause

    def pause(self, tp: TopicPartition) -> None:
        self.state(tp).paused = True

    def resume(self, tp: TopicPartition) -> None:
        self.state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._states.items() if s.paused}

    # ---- lag

    def lag(self, tp: TopicPartition, read_committed: bool) -> int | None:
        """Records between the position and the end (LSO for read_committed), if known."""
        state = self._states.get(tp)
        if state is None or state.position is None:
            return None
        end = state.last_stable_offset if read_committed else state.high_watermark
        if end is None or end < 0:
            return None
        return max(end - state.position, 0)
