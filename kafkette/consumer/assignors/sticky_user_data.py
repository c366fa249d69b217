"""StickyAssignorUserData: the eager sticky assignor's memory of what it owned.

Java's StickyAssignor puts the member's current assignment in its
subscription's user data, without a version header, in the old struct
encoding (big-endian; arrays have an int32 count, strings an int16 length):

- v0: ``previous_assignment: [topic: string, partitions: [int32]]``
- v1: v0 followed by ``generation: int32``

Java writes v1 and reads v1, then v0, and ignores user data it cannot read
(the member is then taken to own nothing). We do the same, so a group mixing
kafkette and Java members stays sticky.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from kafkette.consumer.assignors.sticky_core import Claim
from kafkette.structs import TopicPartition

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int) -> bytes:
    """The v1 user data of a member owning ``partitions`` since ``generation``."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_INT32.pack(len(by_topic)))
    for topic, ps in by_topic.items():
        name = topic.encode("utf-8")
        out += _INT16.pack(len(name))
        out += name
        out += struct.pack(f">i{len(ps)}i", len(ps), *ps)
    out += _INT32.pack(generation)
    return bytes(out)


def decode_sticky_user_data(data: bytes | None) -> Claim | None:
    """The claim in Java's sticky user data: v1, else v0 (generation -1), else None."""
    if not data:
        return None
    try:
        partitions, pos = _read_previous_assignment(data)
    except (struct.error, ValueError):
        return None
    if len(data) - pos >= _INT32.size:
        return Claim(partitions, _INT32.unpack_from(data, pos)[0])
    return Claim(partitions, -1)


def _read_previous_assignment(data: bytes) -> tuple[tuple[TopicPartition, ...], int]:
    (topic_count,), pos = _INT32.unpack_from(data, 0), _INT32.size
    if topic_count < 0:
        raise ValueError("negative topic count")
    partitions: list[TopicPartition] = []
    for _ in range(topic_count):
        (length,) = _INT16.unpack_from(data, pos)
        pos += _INT16.size
        if length < 0 or pos + length > len(data):
            raise ValueError("bad topic name length")
        topic = data[pos : pos + length].decode("utf-8")  # UnicodeDecodeError is a ValueError
        pos += length
        (count,) = _INT32.unpack_from(data, pos)
        pos += _INT32.size
        if count < 0 or pos + 4 * count > len(data):
            raise ValueError("bad partition count")
        partitions.extend(
            TopicPartition(topic, p) for p in struct.unpack_from(f">{count}i", data, pos)
        )
        pos += 4 * count
    return tuple(partitions), pos
