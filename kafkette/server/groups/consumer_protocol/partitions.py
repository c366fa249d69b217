"""Partition sets keyed by topic id, as the consumer group protocol carries them.

An :data:`Assignment` maps a topic id to the partitions of that topic, with no empty
entries: two assignments that hold the same partitions compare equal. Topic ids rather
than names, as Kafka does, so that a partition of a deleted topic is never mistaken for
the same-numbered partition of a new topic of that name.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping

Assignment = Mapping[uuid.UUID, frozenset[int]]
"""Partitions by topic id; never an empty set as a value."""

EMPTY: Assignment = {}


def make(pairs: Iterable[tuple[uuid.UUID, Iterable[int]]]) -> dict[uuid.UUID, frozenset[int]]:
    """An assignment from (topic id, partitions) pairs; repeated topics are merged."""
    merged: dict[uuid.UUID, set[int]] = {}
    for topic_id, partitions in pairs:
        merged.setdefault(topic_id, set()).update(partitions)
    return {t: frozenset(ps) for t, ps in merged.items() if ps}


def union(a: Assignment, b: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    """Every partition in ``a`` or ``b``."""
    return make([*a.items(), *b.items()])


def minus(a: Assignment, b: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    """The partitions of ``a`` not in ``b``."""
    return {t: rest for t, ps in a.items() if (rest := ps - b.get(t, frozenset()))}


def intersect(a: Assignment, b: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    """The partitions in both ``a`` and ``b``."""
    return {t: both for t, ps in a.items() if (both := ps & b.get(t, frozenset()))}


def overlaps(a: Assignment, b: Assignment) -> bool:
    """Whether ``a`` and ``b`` share a partition."""
    return any(ps & b.get(t, frozenset()) for t, ps in a.items())


def is_subset(a: Assignment, b: Assignment) -> bool:
    """Whether every partition of ``a`` is in ``b``."""
    return all(ps <= b.get(t, frozenset()) for t, ps in a.items())


def count(a: Assignment) -> int:
    """How many partitions ``a`` holds."""
    return sum(len(ps) for ps in a.values())


def each(a: Assignment) -> Iterator[tuple[uuid.UUID, int]]:
    """Every (topic id, partition) of ``a``, topics and partitions in sorted order."""
    for topic_id in sorted(a):
        for partition in sorted(a[topic_id]):
            yield topic_id, partition


def pairs(a: Assignment) -> Iterator[tuple[uuid.UUID, int]]:
    """Every (topic id, partition) of ``a``, in no particular order."""
    for topic_id, partitions in a.items():
        for partition in partitions:
            yield topic_id, partition
