"""Choosing a partition for a record, as the Java client and librdkafka do.

- A record with a key goes to ``(murmur2(key) & 0x7fffffff) % partitions``,
  murmur2 being the 32-bit MurmurHash2 seeded ``0x9747b28c``: the same
  partition the Java client and librdkafka's ``murmur2_random`` pick, so
  keyed records from every client of a topic land together.
- A record without a key (or with ``partitioner.ignore.keys``) uses the
  uniform sticky partitioner of KIP-794: it stays on one partition until
  ``batch.size`` bytes were produced there, then moves to another chosen at
  random, which fills batches (fewer, larger requests) and still spreads
  records evenly over time.
- A user callable ``partitioner(key, partitions)`` overrides both.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from murmurhash2 import murmurhash2

MURMUR2_SEED = 0x9747B28C

Partitioner = Callable[[bytes | None, int], int]
"""A user partitioner: (serialized key, number of partitions) -> partition."""


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of ``data`` (unsigned 32 bits)."""
    return int(murmurhash2(data, MURMUR2_SEED))


def keyed_partition(key: bytes, num_partitions: int) -> int:
    """The partition of a keyed record: Java client and librdkafka ``murmur2_random``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Uniform sticky choice for keyless records (KIP-794), one sticky partition per topic."""

    def __init__(self, batch_size: int, rng: random.Random | None = None) -> None:
        self._batch_size = max(batch_size, 1)
        self._rng = rng or random.Random()
        self._current: dict[str, tuple[int, int]] = {}  # topic -> (partition, bytes produced)

    def partition(self, topic: str, num_partitions: int, record_size: int) -> int:
        """The partition for the next keyless record of ``record_size`` bytes."""
        current = self._current.get(topic)
        if current is None or current[0] >= num_partitions or current[1] >= self._batch_size:
            partition = self._next(current[0] if current else None, num_partitions)
            produced = 0
        else:
            partition, produced = current
        self._current[topic] = (partition, produced + record_size)
        return partition

    def _next(self, previous: int | None, num_partitions: int) -> int:
        if num_partitions == 1:
            return 0
        choice = self._rng.randrange(
            num_partitions - (previous is not None and previous < num_partitions)
        )
        if previous is not None and previous < num_partitions and choice >= previous:
            choice += 1  # never the partition we just left
        return choice
