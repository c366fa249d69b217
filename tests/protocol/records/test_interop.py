"""Interoperability with kafka-python and aiokafka (C extension) record code, both ways."""

from __future__ import annotations

import struct
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    # kafka-python's package import trips a DeprecationWarning on Python 3.11+.
    warnings.simplefilter("ignore", DeprecationWarning)
    from aiokafka.record import _crecords as aiokafka_c  # type: ignore[import-untyped]
    from aiokafka.record.memory_records import (  # type: ignore[import-untyped]
        MemoryRecords as AioMemoryRecords,
    )
    from kafka.record import default_records as kp_default  # type: ignore[import-untyped]
    from kafka.record import legacy_records as kp_legacy
    from kafka.record.memory_records import (  # type: ignore[import-untyped]
        MemoryRecords as KpMemoryRecords,
    )

from kafkette.protocol.records import (
    LegacyBatchBuilder,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    iter_batches,
)
from tests.protocol.records.strategies import Spec, record_specs

PEERS = {
    "kafka-python": (kp_default.DefaultRecordBatchBuilder, kp_default.DefaultRecordBatch),
    "aiokafka": (aiokafka_c.DefaultRecordBatchBuilder, aiokafka_c.DefaultRecordBatch),
}
LEGACY_PEERS = {
    "kafka-python": (kp_legacy.LegacyRecordBatchBuilder, KpMemoryRecords),
    "aiokafka": (aiokafka_c.LegacyRecordBatchBuilder, AioMemoryRecords),
}
CODECS = [0, 1, 2, 3, 4]


def sample_specs(n: int = 300) -> list[Spec]:
    """Keys, null keys, null values, headers (null header values too), compressible data."""
    specs: list[Spec] = []
    for i in range(n):
        key = None if i % 3 == 0 else b"key-%d" % i
        value = None if i % 11 == 0 else b"value %d " % i * (i % 20)
        hdrs: tuple[tuple[str, bytes | None], ...] = ()
        if i % 4 == 0:
            hdrs = (("trace", b"id-%d" % i), ("n\u00e9ant", None))
        specs.append((1_700_000_000_000 + i * 3, key, value, hdrs))
    return specs


def peer_build(builder_cls: Any, specs: list[Spec], codec: int, base_offset: int = 0) -> bytes:
    builder = builder_cls(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for i, (ts, key, value, hdrs) in enumerate(specs):
        builder.append(i, timestamp=ts, key=key, value=value, headers=list(hdrs))
    buf = bytearray(builder.build())
    struct.pack_into(">q", buf, 0, base_offset)  # the base offset is outside the CRC
    return bytes(buf)


def peer_records(reader: Callable[[bytes], Any], buf: bytes) -> list[Record]:
    return [
        Record(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers))
        for r in reader(buf)
    ]


def expected(specs: list[Spec], base_offset: int = 0) -> list[Record]:
    return [Record(base_offset + i, *spec) for i, spec in enumerate(specs)]


def ours_build(specs: list[Spec], codec: int, base_offset: int = 0) -> bytes:
    builder = RecordBatchBuilder(compression=codec, base_offset=base_offset)
    for ts, key, value, hdrs in specs:
        builder.append(ts, key, value, hdrs)
    return builder.build()


@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("codec", CODECS)
def test_peer_batches_read_exactly(peer: str, codec: int) -> None:
    """A batch the peer builds decodes to exactly the records it was given."""
    specs = sample_specs()
    buf = peer_build(PEERS[peer][0], specs, codec, base_offset=1000)
    batch = RecordBatch.from_buffer(buf)
    assert batch.header.compression == codec
    assert batch.records() == expected(specs, 1000)


@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_read_exactly_by_peer(peer: str, codec: int) -> None:
    """Our batch, every codec, reads in the peer to exactly the records given."""
    specs = sample_specs()
    buf = ours_build(specs, codec, base_offset=1000)
    assert peer_records(PEERS[peer][1], buf) == expected(specs, 1000)


@pytest.mark.parametrize("peer", PEERS)
def test_uniform_batches_both_ways(peer: str) -> None:
    """Many same-shaped records (16-byte keys, 100-byte values), the benchmark's shape."""
    specs: list[Spec] = [
        (1_700_000_000_000 + i // 10, b"%016d" % i, bytes([i % 256]) * 100, ()) for i in range(2000)
    ]
    builder_cls, reader = PEERS[peer]
    for codec in (0, 3):
        assert RecordBatch.from_buffer(peer_build(builder_cls, specs, codec)).records() == (
            expected(specs)
        )
        assert peer_records(reader, ours_build(specs, codec)) == expected(specs)


def test_same_bytes_as_aiokafka() -> None:
    """For the same records our uncompressed batch is byte-identical to aiokafka's."""
    specs = sample_specs(50)
    assert ours_build(specs, 0) == peer_build(PEERS["aiokafka"][0], specs, 0)


@settings(max_examples=20, deadline=None)
@given(specs=record_specs(max_size=30), codec=st.sampled_from(CODECS))
def test_random_records_both_ways_with_aiokafka(specs: list[Spec], codec: int) -> None:
    """Random records survive ours -> aiokafka and aiokafka -> ours."""
    builder_cls, reader = PEERS["aiokafka"]
    assert RecordBatch.from_buffer(peer_build(builder_cls, specs, codec)).records() == (
        expected(specs)
    )
    assert peer_records(reader, ours_build(specs, codec)) == expected(specs)


def memory_records(memory_cls: Any, buf: bytes) -> list[Record]:
    records = memory_cls(buf)
    out: list[Record] = []
    while (batch := records.next_batch()) is not None:
        for r in batch:
            ts = -1 if r.timestamp is None else r.timestamp
            out.append(Record(r.offset, ts, r.key, r.value, tuple(getattr(r, "headers", ()))))
    return out


@pytest.mark.parametrize("peer", PEERS)
def test_mixed_buffer_through_memory_records(peer: str) -> None:
    """Concatenated batches (several codecs) read the same through both walkers."""
    memory_cls = {"kafka-python": KpMemoryRecords, "aiokafka": AioMemoryRecords}[peer]
    parts = []
    want: list[Record] = []
    base = 0
    for codec in CODECS:
        specs = sample_specs(40)
        parts.append(ours_build(specs, codec, base_offset=base))
        want += expected(specs, base)
        base += len(specs)
    buf = b"".join(parts)
    assert [r for b in iter_batches(buf) for r in b] == want
    assert memory_records(memory_cls, buf) == want


def legacy_specs() -> list[tuple[int, bytes | None, bytes | None]]:
    return [
        (
            1_600_000_000_000 + i,
            None if i % 3 == 0 else b"k%d" % i,
            None if i % 5 == 0 else b"v" * i,
        )
        for i in range(60)
    ]


def legacy_cases() -> list[tuple[str, int, int]]:
    cases = []
    for peer in LEGACY_PEERS:
        for magic in (0, 1):
            for codec in (0, 1, 2, 3):
                if magic == 0 and codec == 3:
                    continue  # peers need xxhash for Kafka 0.8's lz4 framing
                cases.append((peer, magic, codec))
    return cases


@pytest.mark.parametrize(("peer", "magic", "codec"), legacy_cases())
def test_legacy_both_ways(peer: str, magic: int, codec: int) -> None:
    """Legacy message sets, plain and compressed, read the same both ways."""
    builder_cls, memory_cls = LEGACY_PEERS[peer]
    specs = legacy_specs()
    want = [
        Record(i, ts if magic == 1 else -1, key, value, ())
        for i, (ts, key, value) in enumerate(specs)
    ]
    theirs = builder_cls(magic=magic, compression_type=codec, batch_size=1 << 30)
    for i, (ts, key, value) in enumerate(specs):
        theirs.append(i, timestamp=ts if magic == 1 else None, key=key, value=value)
    their_buf = bytes(theirs.build())
    assert [r for b in iter_batches(their_buf) for r in b] == want

    ours = LegacyBatchBuilder(magic=magic, compression=codec)
    for ts, key, value in specs:
        ours.append(ts, key, value)
    our_buf = ours.build()
    assert memory_records(memory_cls, our_buf) == want
    if codec == 0:
        assert our_buf == their_buf


@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("codec", CODECS)
def test_empty_batches_read_by_peer(peer: str, codec: int) -> None:
    """A batch without records (all codecs, snappy's framing of nothing included)."""
    assert peer_records(PEERS[peer][1], ours_build([], codec)) == []


@pytest.mark.parametrize("peer", PEERS)
def test_large_lz4_batch_read_by_peer(peer: str) -> None:
    """Several lz4 blocks (Kafka needs them independent) read by the peer."""
    specs: list[Spec] = [(1000 + i, None, bytes([i % 256]) * 500, ()) for i in range(600)]
    assert peer_records(PEERS[peer][1], ours_build(specs, 3)) == expected(specs)
