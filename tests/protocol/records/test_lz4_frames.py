"""lz4 frames as peers write them, with every checksum variant, and hostile ones.

Kafka's reader checks the header checksum (magic 1 and 2), block checksums
when a frame has them, refuses dependent blocks, other magic numbers and
blocks over the frame's maximum size; liblz4 (which decodes here) adds the
content checksum and the content size. Every refusal is a CorruptRecordError,
going over the size limit a DecompressionLimitError, nothing else.
"""

from __future__ import annotations

import random
import struct
import tracemalloc
import warnings
from collections.abc import Callable

import cramjam
import lz4.block  # type: ignore[import-untyped]
import lz4.frame  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import aiokafka.codec  # type: ignore[import-untyped]
    import kafka.codec  # type: ignore[import-untyped]

from kafkette.protocol.errors import CorruptRecordError, DecompressionLimitError
from kafkette.protocol.records import LZ4, Record, compress, decompress, iter_batches
from kafkette.protocol.records.compression import xxh32

MIB = 1 << 20
MAGIC = b"\x04\x22\x4d\x18"
FLG_VERSION = 0x40
FLG_INDEPENDENT = 0x20
FLG_BLOCK_CHECKSUM = 0x10
FLG_CONTENT_SIZE = 0x08
FLG_CONTENT_CHECKSUM = 0x04
UNCOMPRESSED = 0x80000000


def text(size: int) -> bytes:
    """Compressible bytes, different all along (as record batches are)."""
    out = b"".join(b"record %d value %d; " % (i, i * 7919 % 1000) for i in range(size // 10))
    return out[:size]


def noise(size: int, seed: int = 1) -> bytes:
    """Incompressible bytes: lz4 stores their blocks uncompressed."""
    return random.Random(seed).randbytes(size)


PAYLOADS = {
    "empty": b"",
    "small": text(300),
    "three blocks": text(150_000),
    "incompressible": noise(140_000),
    "mixed": text(70_000) + noise(140_000) + text(70_000),
    "zeros": bytes(1_100_000),
}


def cramjam_lz4(data: bytes, *, content_checksum: bool) -> bytes:
    compressor = cramjam.lz4.Compressor(
        level=4, content_checksum=content_checksum, block_linked=False
    )
    compressor.compress(data)
    return bytes(compressor.finish())


WRITERS: dict[str, Callable[[bytes], bytes]] = {
    "kafkette": lambda data: compress(LZ4, data),
    "kafka-python": kafka.codec.lz4_encode,
    "aiokafka": aiokafka.codec.lz4_encode,  # cramjam, block checksums
    "cramjam+content-checksum": lambda data: cramjam_lz4(data, content_checksum=True),
    "python-lz4 all checksums": lambda data: lz4.frame.compress(
        data, block_linked=False, block_checksum=True, content_checksum=True, store_size=True
    ),
    "python-lz4 no checksum, no size": lambda data: lz4.frame.compress(
        data, block_linked=False, store_size=False
    ),
    "python-lz4 4 MiB blocks": lambda data: lz4.frame.compress(
        data, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX4MB
    ),
    "python-lz4 256 KiB blocks": lambda data: lz4.frame.compress(
        data, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX256KB
    ),
}
"""Each writer's FLG/BD bytes are checked in test_writer_flags."""

EXPECTED_FLAGS = {
    "kafkette": (0x68, 0x40),
    "kafka-python": (0x68, 0x40),
    "aiokafka": (0x70, 0x40),
    "cramjam+content-checksum": (0x74, 0x40),
    "python-lz4 all checksums": (0x7C, 0x40),
    "python-lz4 no checksum, no size": (0x60, 0x40),
    "python-lz4 4 MiB blocks": (0x68, 0x70),
    "python-lz4 256 KiB blocks": (0x68, 0x50),
}


def blocks(frame: bytes) -> list[int]:
    """The block size fields of a one-frame stream (high bit: stored uncompressed)."""
    flg = frame[4]
    pos = 7 + (8 if flg & FLG_CONTENT_SIZE else 0)
    sizes = []
    while True:
        (size,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if size == 0:
            break
        sizes.append(size)
        pos += (size & ~UNCOMPRESSED) + (4 if flg & FLG_BLOCK_CHECKSUM else 0)
    assert pos + (4 if flg & FLG_CONTENT_CHECKSUM else 0) == len(frame)
    return sizes


def header_checksum(descriptor: bytes) -> int:
    return (xxh32(descriptor) >> 8) & 0xFF


def frame(
    parts: list[tuple[bytes, bool]],
    *,
    flg: int = FLG_VERSION | FLG_INDEPENDENT,
    bd: int = 0x40,
    content_size: int | None = None,
    content_checksum: int | None = None,
    block_checksums: bool = False,
) -> bytes:
    """A frame made by hand: blocks as (payload, stored uncompressed?)."""
    if content_size is not None:
        flg |= FLG_CONTENT_SIZE
    if content_checksum is not None:
        flg |= FLG_CONTENT_CHECKSUM
    if block_checksums:
        flg |= FLG_BLOCK_CHECKSUM
    descriptor = bytes((flg, bd))
    if content_size is not None:
        descriptor += struct.pack("<Q", content_size)
    out = MAGIC + descriptor + bytes((header_checksum(descriptor),))
    for payload, raw in parts:
        out += struct.pack("<I", len(payload) | (UNCOMPRESSED if raw else 0)) + payload
        if block_checksums:
            out += struct.pack("<I", xxh32(payload))
    out += b"\x00\x00\x00\x00"
    if content_checksum is not None:
        out += struct.pack("<I", content_checksum)
    return out


def block(data: bytes) -> bytes:
    """An lz4 block (no size prefix) of ``data``."""
    return lz4.block.compress(data, store_size=False)  # type: ignore[no-any-return]


def outcome(data: bytes, max_size: int = 64 * MIB) -> bytes | type[Exception]:
    try:
        return decompress(LZ4, data, max_size=max_size)
    except (CorruptRecordError, DecompressionLimitError) as exc:
        return type(exc)


@pytest.mark.parametrize("writer", WRITERS)
def test_writer_flags(writer: str) -> None:
    """Each writer writes the frame descriptor this file's variants rely on."""
    out = WRITERS[writer](PAYLOADS["zeros"])  # liblz4 shrinks the block size to small data
    assert out[:4] == MAGIC
    assert (out[4], out[5]) == EXPECTED_FLAGS[writer]


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("writer", WRITERS)
def test_peer_frames_decode(writer: str, payload: str) -> None:
    """Frames of every writer and flag variant decode to the exact bytes."""
    data = PAYLOADS[payload]
    assert decompress(LZ4, WRITERS[writer](data)) == data


@pytest.mark.parametrize("writer", ["kafkette", "aiokafka", "cramjam+content-checksum"])
def test_block_kinds(writer: str) -> None:
    """The mixed payload makes compressed and stored blocks; both kinds decode."""
    out = WRITERS[writer](PAYLOADS["mixed"])
    sizes = blocks(out)
    assert len(sizes) == 5
    assert any(size & UNCOMPRESSED for size in sizes)
    assert any(not size & UNCOMPRESSED for size in sizes)
    assert decompress(LZ4, out) == PAYLOADS["mixed"]


# A batch librdkafka (confluent-kafka 2.16.1) produced to kafkette serve with
# compression.type=lz4, read back from the log: FLG 0x60 (no checksums, no
# content size), BD 0x40, one block.
LIBRDKAFKA_BATCH = bytes.fromhex(
    "0000000000000000000000c30000000002aace92810003000000040000018bcfe568000000018bcfe56804ff"
    "ffffffffffffffffffffffffff0000000504224d1860408283000000ff06e2020000000a6b65792d30c00276"
    "616c7565203020080085b1020268047630e202000202b3001431b3001331b3000f08007f01b3006131e20200"
    "0404b3001432b3001332b3000f08007f01b3006132e202000606b3001433b3001333b3000f08007f01b30061"
    "33e202000808b3001434b3001334b3000f08007f6002026804763400000000"
)


def test_librdkafka_batch() -> None:
    """librdkafka's lz4 batch: the exact records."""
    (batch,) = iter_batches(LIBRDKAFKA_BATCH)
    assert (LIBRDKAFKA_BATCH[61 + 4], LIBRDKAFKA_BATCH[61 + 5]) == (0x60, 0x40)
    assert list(batch) == [
        Record(i, 1_700_000_000_000 + i, b"key-%d" % i, b"value %d " % i * 20, (("h", b"v%d" % i),))
        for i in range(5)
    ]


@pytest.mark.parametrize(
    "payload", [PAYLOADS["three blocks"], PAYLOADS["incompressible"]], ids=["lz4", "stored"]
)
def test_every_block_checksum_is_verified(payload: bytes) -> None:
    """A wrong checksum on any block (compressed or stored) is corrupt, as in Kafka."""
    out = WRITERS["aiokafka"](payload)
    pos = 7
    checked = 0
    while True:
        (size,) = struct.unpack_from("<I", out, pos)
        if size == 0:
            break
        end = pos + 4 + (size & ~UNCOMPRESSED)
        bad = bytearray(out)
        bad[end] ^= 0x01  # first byte of the block's checksum
        assert outcome(bytes(bad)) is CorruptRecordError
        pos = end + 4
        checked += 1
    assert checked == 3


def test_content_checksum_is_verified() -> None:
    """A wrong content checksum is corrupt (liblz4; Kafka since KAFKA-20528)."""
    out = bytearray(WRITERS["cramjam+content-checksum"](PAYLOADS["three blocks"]))
    out[-1] ^= 0x80
    assert outcome(bytes(out)) is CorruptRecordError


@pytest.mark.parametrize("declared", [299, 301, 1 << 62])
def test_content_size_must_match(declared: int) -> None:
    """A content size other than the decoded size is corrupt; a huge one allocates nothing.

    0 reads as "unknown", as in liblz4 (Kafka ignores the field altogether).
    """
    data = PAYLOADS["small"]
    assert decompress(LZ4, frame([(block(data), False)], content_size=300)) == data
    assert decompress(LZ4, frame([(block(data), False)], content_size=0)) == data
    assert outcome(frame([(block(data), False)], content_size=declared)) is CorruptRecordError


def test_hand_made_variants() -> None:
    """Stored and compressed blocks, block and content checksums, several frames in a row."""
    a, b = text(5000), noise(3000)
    parts = [(block(a), False), (b, True)]
    whole = a + b
    variants = [
        frame(parts),
        frame(parts, block_checksums=True),
        frame(parts, content_checksum=xxh32(whole)),
        frame(parts, content_size=len(whole), content_checksum=xxh32(whole), block_checksums=True),
    ]
    for variant in variants:
        assert decompress(LZ4, variant) == whole
    assert decompress(LZ4, b"".join(variants)) == whole * 4
    assert decompress(LZ4, frame([])) == b""


def test_header_checksum() -> None:
    """A wrong header checksum is corrupt for magic 1 and 2, ignored for magic 0 (Kafka 0.8)."""
    good = frame([(block(text(1000)), False)])
    bad = bytearray(good)
    bad[6] ^= 0x01
    assert outcome(bytes(bad)) is CorruptRecordError
    assert decompress(LZ4, bytes(bad), magic=0) == text(1000)


@pytest.mark.parametrize(
    ("flg", "bd"),
    [
        (0x60, 0x30),  # block maximum size id 3 (Kafka: between 4 and 7)
        (0x60, 0x00),
        (0x60, 0xC0),  # reserved bit of BD
        (0x60, 0x41),
        (0x62, 0x40),  # reserved bit of FLG
        (0xA0, 0x40),  # version 2
        (0x20, 0x40),  # version 0
        (0x40, 0x40),  # dependent blocks
        (0x50, 0x40),
    ],
)
def test_descriptors_kafka_refuses(flg: int, bd: int) -> None:
    """Frame descriptors Kafka's reader refuses are corrupt here too."""
    assert outcome(frame([(block(text(1000)), False)], flg=flg, bd=bd)) is CorruptRecordError


def test_dependent_blocks_are_refused() -> None:
    """python-lz4's default (linked blocks, over one block of data) is refused, as in Kafka."""
    linked = lz4.frame.compress(PAYLOADS["three blocks"])
    assert linked[4] & FLG_INDEPENDENT == 0
    with pytest.raises(CorruptRecordError, match="dependent blocks"):
        decompress(LZ4, linked)
    # and after a good frame too
    with pytest.raises(CorruptRecordError, match="dependent blocks"):
        decompress(LZ4, compress(LZ4, b"first") + linked)


@pytest.mark.parametrize(
    "data",
    [
        struct.pack("<II", 0x184D2A50, 4) + b"skip" + compress(LZ4, b"x"),  # skippable frame
        compress(LZ4, b"x") + struct.pack("<II", 0x184D2A5F, 0),
        b"\x00\x00\x00\x00" + compress(LZ4, b"x"),
        compress(LZ4, b"x") + b"garbage!",
        compress(LZ4, b"x") + b"\x00",
        b"",
        MAGIC,
    ],
    ids=["skippable", "skippable-after", "zeros", "garbage-after", "byte-after", "empty", "magic"],
)
def test_not_lz4_frames(data: bytes) -> None:
    """Other magic numbers (skippable frames too), stray or missing bytes are corrupt."""
    assert outcome(data) is CorruptRecordError


@pytest.mark.parametrize(
    "parts",
    [
        [(b"\x00" * 65537, True)],  # stored block over the 64 KiB maximum
        [(block(b"\x00" * 65537), False)],  # decodes to more than the maximum
        [(block(text(1000))[:-3], False)],  # cut inside its last sequence
        [(b"\xf0", False)],  # literal length past the block
        [(b"\x1f\x61\xff\xff", False)],  # match offset before the block start
        [(b"\x1f\x61\x01\x00", False)],  # a block ending on a match
    ],
    ids=["stored-too-big", "decodes-too-big", "cut", "literals-past", "offset-past", "match-end"],
)
def test_bad_blocks(parts: list[tuple[bytes, bool]]) -> None:
    """Blocks over the maximum size or not well formed are corrupt."""
    assert outcome(frame(parts)) is CorruptRecordError


def test_every_truncation_is_corrupt() -> None:
    """A frame cut anywhere (header, block size, block, checksum, end mark) is corrupt."""
    out = WRITERS["cramjam+content-checksum"](PAYLOADS["mixed"][:140_000])
    assert len(blocks(out)) == 3
    cuts = sorted({*range(40), *range(0, len(out), 97), *range(len(out) - 40, len(out))})
    for cut in cuts:
        assert outcome(out[:cut]) is CorruptRecordError, cut


def test_every_flip_of_a_checksummed_frame_is_caught() -> None:
    """With block and content checksums, changing any one byte is corrupt."""
    out = WRITERS["cramjam+content-checksum"](text(150_000))
    assert len(blocks(out)) == 3
    for pos in range(len(out)):
        bad = bytearray(out)
        bad[pos] ^= 0x5A
        assert outcome(bytes(bad)) is CorruptRecordError, pos


@settings(max_examples=60, deadline=None)
@given(
    writer=st.sampled_from(sorted(WRITERS)),
    payload=st.sampled_from(["small", "three blocks", "mixed"]),
    edits=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), max_size=4),
    tail=st.binary(max_size=8),
    max_size=st.sampled_from([1000, 100_000, 64 * MIB]),
)
def test_damaged_frames(
    writer: str, payload: str, edits: list[tuple[int, int]], tail: bytes, max_size: int
) -> None:
    """Damaged frames give the data, a CorruptRecordError or a DecompressionLimitError only."""
    data = PAYLOADS[payload]
    out = bytearray(WRITERS[writer](data))
    for pos, xor in edits:
        out[pos % len(out)] ^= xor
    damaged = bytes(out) + tail
    result = outcome(damaged, max_size)
    if isinstance(result, bytes):
        assert len(result) <= max_size
    if not edits and not tail:
        assert result == (data if len(data) <= max_size else DecompressionLimitError)


def test_bomb_of_4_mib_blocks_is_bounded() -> None:
    """160 MiB of zeros in 4 MiB blocks stops at a 1 MiB limit, allocating little."""
    zeros = block(b"\x00" * (4 * MIB))
    bomb = frame([(zeros, False)] * 40, bd=0x70)
    assert len(bomb) < 1 * MIB
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimitError):
            decompress(LZ4, bomb, max_size=MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * MIB
    # the same frame within the limit decodes whole
    assert decompress(LZ4, frame([(zeros, False)] * 2, bd=0x70)) == b"\x00" * (8 * MIB)


def test_limit_counts_all_frames() -> None:
    """The limit bounds the output of all the frames together, exactly."""
    one = compress(LZ4, text(40_000))
    assert decompress(LZ4, one * 3, max_size=120_000) == text(40_000) * 3
    with pytest.raises(DecompressionLimitError):
        decompress(LZ4, one * 3, max_size=119_999)
