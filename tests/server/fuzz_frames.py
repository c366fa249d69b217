"""Seed request frames for every API the broker serves, and their mutations.

A seed is a well-formed frame (size prefix, header, body) of one API at one
version, built from the generated message tables: every present field gets a
plausible value (one element per array, the topic ``fuzz``, a real record batch
for Produce), so that handlers get past their first checks. :func:`mutate`
turns a seed into a hostile frame the way a fuzzer or a broken client would:
bit flips, truncation, 32-bit, 16-bit and varint count or length fields set to
-1, 0, 2^20 or 2^31-1, duplicated or spliced chunks. Everything is drawn from
a :class:`random.Random`, so a seed number replays a run exactly.
"""

from __future__ import annotations

import random
import struct
import uuid
from collections.abc import Iterable
from typing import Any

import attrs

import kafkette.server.handlers  # noqa: F401  (registers every handler)
from kafkette.protocol.headers import encode_request
from kafkette.protocol.schema import Array, Field, Request, Struct, in_range
from kafkette.server.dispatch import HANDLERS
from tests.server.dataplane import NOW, batch

TOPIC = "fuzz"
"""The topic the seeds name (the harness creates it with two partitions)."""

_INT_VALUES = {
    "num_partitions": 1,
    "replication_factor": 1,
    "count": 3,
    "acks": 1,
    "max_bytes": 1_048_576,
    "partition_max_bytes": 1_048_576,
    "max_wait_ms": 10,
    "timeout_ms": 100,
    "session_timeout_ms": 10_000,
    "rebalance_timeout_ms": 10_000,
    "transaction_timeout_ms": 10_000,
    "replica_id": -1,
    "producer_id": -1,
    "producer_epoch": -1,
    "generation_id": -1,
    "leader_epoch": -1,
    "current_leader_epoch": -1,
    "last_fetched_epoch": -1,
    "log_start_offset": -1,
    "timestamp": -1,
    "max_num_offsets": 1,
    "session_epoch": -1,
    "key_type": 0,
    "resource_type": 2,
    "operation": 0,
}


@attrs.frozen
class Seed:
    """One well-formed request frame."""

    api_key: int
    version: int
    name: str
    frame: bytes
    header_size: int
    """Size prefix plus request header: mutations mostly spare it."""


def _value(field: Field, ftype: Any, version: int) -> Any:
    if isinstance(ftype, Array):
        return [_value(field, ftype.element, version)]
    if isinstance(ftype, type) and issubclass(ftype, Struct):
        return _struct(ftype, version)
    if ftype in ("int8", "int16", "uint16", "int32", "int64"):
        return _INT_VALUES.get(field.name, 0)
    if ftype == "bool":
        return False
    if ftype == "float64":
        return 0.0
    if ftype == "uuid":
        return uuid.UUID(int=0)
    if ftype == "string":
        return TOPIC
    if ftype == "bytes":
        return b"\x00\x01"
    if ftype == "records":
        return batch([(b"k", b"v"), (None, b"w")], timestamp=NOW)
    raise AssertionError(f"unknown field type {ftype!r}")


def _struct(cls: type[Struct], version: int) -> Any:
    values: dict[str, Any] = {}
    for field in cls.FIELDS:
        if in_range(version, field.versions):
            values[field.name] = _value(field, field.type, version)
    return cls(**values)


def seed(request_cls: type[Request], version: int, correlation_id: int = 1) -> Seed:
    """The seed frame of ``request_cls`` at ``version``."""
    request = _struct(request_cls, version)
    body = bytes(encode_request(request, version, correlation_id, "fuzz"))
    header_size = 4 + len(body) - len(request.encode(version))
    return Seed(
        request_cls.API_KEY,
        version,
        f"{request_cls.NAME}-v{version}",
        struct.pack(">i", len(body)) + body,
        header_size,
    )


def seeds() -> list[Seed]:
    """Seeds for every API the broker serves, at its lowest and highest version."""
    return [
        seed(entry.request, version)
        for entry in sorted(HANDLERS.values(), key=lambda e: e.request.API_KEY)
        for version in sorted({entry.min_version, entry.max_version})
    ]


EXTREMES_32 = (-1, 0, 2**31 - 1, 2**20, -(2**31), 10_001)
EXTREMES_16 = (-1, 0, 2**15 - 1, -(2**15))
EXTREMES_VARINT = (0, 1, 2**31, 2**20 + 1, 2**32 - 1)
"""Unsigned varints of compact lengths: null, empty, 2^31-1 and 2^20 elements, -2."""


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _with_size(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def mutate(rng: random.Random, target: Seed, others: list[Seed]) -> tuple[str, bytes]:
    """A hostile variant of ``target``: what was done, and the frame to send."""
    body = bytearray(target.frame[4:])
    start = target.header_size - 4 if rng.random() < 0.85 else 0
    start = min(start, max(len(body) - 1, 0))

    def where() -> int:
        return rng.randrange(start, max(len(body), start + 1))

    kind = rng.choice(
        ("flip", "flip", "truncate", "int32", "int32", "int16", "varint", "splice", "repeat")
    )
    if kind == "flip":
        for _ in range(rng.randint(1, 4)):
            if body:
                at = where()
                body[at] ^= 1 << rng.randrange(8)
        return kind, _with_size(bytes(body))
    if kind == "truncate":
        cut = where()
        if rng.random() < 0.5:  # the size prefix promises more than comes
            return "truncate-short", target.frame[: 4 + cut]
        return kind, _with_size(bytes(body[:cut]))
    if kind in ("int32", "int16"):
        at = where()
        if kind == "int32":
            body[at : at + 4] = struct.pack(">i", rng.choice(EXTREMES_32))
        else:
            body[at : at + 2] = struct.pack(">h", rng.choice(EXTREMES_16))
        return kind, _with_size(bytes(body))
    if kind == "varint":
        at = where()
        body[at : at + 1] = _varint(rng.choice(EXTREMES_VARINT))
        return kind, _with_size(bytes(body))
    if kind == "splice":
        donor = rng.choice(others).frame[4:]
        a = rng.randrange(len(donor))
        chunk = donor[a : a + rng.randint(1, 32)]
        at = where()
        body[at : at + rng.randint(0, len(chunk))] = chunk
        return kind, _with_size(bytes(body))
    at = where()
    chunk = body[at : at + rng.randint(1, 24)]
    body[at:at] = chunk * rng.randint(1, 8)
    return kind, _with_size(bytes(body))


def cases(rng: random.Random, pool: list[Seed], count: int) -> Iterable[tuple[Seed, str, bytes]]:
    """``count`` mutated frames, cycling over ``pool`` so that every seed gets its share."""
    for index in range(count):
        target = pool[index % len(pool)]
        kind, frame = mutate(rng, target, pool)
        yield target, kind, frame
