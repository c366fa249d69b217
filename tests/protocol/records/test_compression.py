"""Codecs: round trips, the framings other clients use, and bounded decompression."""

from __future__ import annotations

import struct
import subprocess
import sys
import zlib
from typing import Any

import lz4.frame  # type: ignore[import-untyped]
import pytest
import snappy  # type: ignore[import-untyped]
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.protocol.errors import (
    CorruptRecordError,
    DecompressionLimitError,
    UnsupportedCompressionError,
)
from kafkette.protocol.records import compression
from kafkette.protocol.records.compression import (
    GZIP,
    LZ4,
    NO_COMPRESSION,
    SNAPPY,
    XERIAL_MAGIC,
    ZSTD,
    codec_id,
    compress,
    decompress,
)
from tests.protocol.records.bombs import gzip_gib_of_zeros

CODECS = [NO_COMPRESSION, GZIP, SNAPPY, LZ4, ZSTD]
GIB = 1 << 30
MIB = 1 << 20


@settings(max_examples=40, deadline=None)
@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=3000))
def test_round_trip(codec: int, data: bytes) -> None:
    """Every codec gives back exactly what it compressed."""
    assert decompress(codec, compress(codec, data), max_size=len(data)) == data


def test_round_trip_large_repetitive() -> None:
    """Several xerial blocks / gzip and lz4 chunks survive a round trip."""
    data = bytes(range(256)) * 1000 + b"\0" * 200_000
    for codec in CODECS:
        assert decompress(codec, compress(codec, data)) == data


def test_gzip_is_a_plain_gzip_stream() -> None:
    """The gzip codec writes a gzip member any gzip reader decodes."""
    data = b"hello kafka" * 100
    assert zlib.decompress(compress(GZIP, data), wbits=31) == data


def test_gzip_reads_concatenated_members() -> None:
    """Two gzip members back to back read as one stream, as Java's GZIPInputStream does."""
    assert decompress(GZIP, compress(GZIP, b"abc") + compress(GZIP, b"def")) == b"abcdef"


def test_snappy_writes_xerial_framing() -> None:
    """Header, version 1, compat 1, then int32-sized 32 KiB blocks."""
    data = bytes(range(256)) * 300  # 76,800 bytes: three blocks
    out = compress(SNAPPY, data)
    assert out[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    pos = 16
    blocks = []
    while pos < len(out):
        (size,) = struct.unpack_from(">i", out, pos)
        blocks.append(snappy.uncompress(out[pos + 4 : pos + 4 + size]))
        pos += 4 + size
    assert [len(b) for b in blocks] == [32768, 32768, 11264]
    assert b"".join(blocks) == data


def test_snappy_reads_a_raw_block() -> None:
    """A raw snappy block (no xerial header) is accepted too."""
    assert decompress(SNAPPY, snappy.compress(b"raw block" * 50)) == b"raw block" * 50


def test_lz4_is_the_standard_frame_format() -> None:
    """lz4 output is an LZ4 frame, and any LZ4 frame (even several) reads back."""
    data = b"lz4 data " * 500
    assert lz4.frame.decompress(compress(LZ4, data)) == data
    two = lz4.frame.compress(b"first") + lz4.frame.compress(b"second", content_checksum=True)
    assert decompress(LZ4, two) == b"firstsecond"


def test_zstd_is_a_standard_frame() -> None:
    """zstd output is one standard frame any zstd reader decodes."""
    data = b"zstd data " * 500
    assert zstandard.ZstdDecompressor().decompress(compress(ZSTD, data)) == data


def test_codec_names() -> None:
    """compression.type names map to codec ids; unknown names raise."""
    assert [codec_id(n) for n in ("none", "gzip", "snappy", "lz4", "ZSTD")] == CODECS
    with pytest.raises(UnsupportedCompressionError):
        codec_id("brotli")


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec: int) -> None:
    """Codec ids outside 0-4 raise UnsupportedCompressionError both ways."""
    with pytest.raises(UnsupportedCompressionError):
        compress(codec, b"x")
    with pytest.raises(UnsupportedCompressionError):
        decompress(codec, b"x")


def test_zstd_is_part_of_a_plain_install() -> None:
    """zstandard is a base dependency, imported with the codecs: an install without it
    fails at ``import kafkette``, never later in a producer's sender (#28)."""
    blocked = (
        "import sys\n"
        "sys.modules['zstandard'] = None\n"
        "try:\n"
        "    import kafkette.protocol.records.compression\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc.name)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout == "ModuleNotFoundError zstandard\n"
    assert compression.zstandard is zstandard
    assert decompress(ZSTD, compress(ZSTD, b"x" * 1000)) == b"x" * 1000


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_garbage_is_corrupt(codec: int) -> None:
    """Bytes that are not valid compressed data raise CorruptRecordError."""
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\x00\x01garbage that is not compressed" * 3)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_truncated_stream_is_corrupt(codec: int) -> None:
    """A compressed stream cut short raises CorruptRecordError, never partial data."""
    data = compress(codec, bytes(range(256)) * 200)
    with pytest.raises(CorruptRecordError):
        decompress(codec, data[: len(data) - 7])


@pytest.mark.parametrize("codec", CODECS)
def test_limit_is_exact(codec: int) -> None:
    """Output of exactly max_size bytes passes; one byte more raises."""
    data = b"a" * 5000
    blob = compress(codec, data)
    assert decompress(codec, blob, max_size=5000) == data
    with pytest.raises(DecompressionLimitError) as info:
        decompress(codec, blob, max_size=4999)
    assert info.value.limit == 4999


def _zeros_stream(compressor: Any, total: int, flush: Any) -> bytes:
    """Compress ``total`` zero bytes chunk by chunk (never holding them all)."""
    chunk = bytes(4 * MIB)
    out = [compressor(chunk) for _ in range(total // len(chunk))]
    out.append(flush())
    return b"".join(out)


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    return gzip_gib_of_zeros()


def test_gzip_bomb_is_bounded(gzip_bomb: bytes) -> None:
    """1 GiB of zeros, gzip-compressed to ~4 MiB, stops at the limit."""
    assert len(gzip_bomb) < 8 * MIB
    with pytest.raises(DecompressionLimitError):
        decompress(GZIP, gzip_bomb, max_size=MIB)


def test_lz4_bomb_is_bounded() -> None:
    """256 MiB of zeros as lz4 (independent blocks, as Kafka reads) stops at the limit."""
    comp = lz4.frame.LZ4FrameCompressor(block_linked=False)
    blob = comp.begin() + _zeros_stream(comp.compress, 256 * MIB, comp.flush)
    with pytest.raises(DecompressionLimitError):
        decompress(LZ4, blob, max_size=MIB)


def test_zstd_bomb_is_bounded() -> None:
    """256 MiB of zeros as zstd stops at the limit."""
    obj = zstandard.ZstdCompressor().compressobj()
    blob = _zeros_stream(obj.compress, 256 * MIB, obj.flush)
    with pytest.raises(DecompressionLimitError):
        decompress(ZSTD, blob, max_size=MIB)


def test_snappy_declared_length_is_checked_first() -> None:
    """A raw block claiming 1 GiB is refused from its length prefix alone."""
    claim = bytearray()
    value = GIB
    while value >= 0x80:
        claim.append((value & 0x7F) | 0x80)
        value >>= 7
    claim.append(value)
    with pytest.raises(DecompressionLimitError):
        decompress(SNAPPY, bytes(claim) + b"\x00" * 10, max_size=MIB)


def test_snappy_xerial_blocks_add_up_to_the_limit() -> None:
    """xerial blocks each under the limit still add up against it."""
    blob = compress(SNAPPY, bytes(2 * MIB))
    with pytest.raises(DecompressionLimitError):
        decompress(SNAPPY, blob, max_size=MIB)


def test_none_codec_is_bounded() -> None:
    """Uncompressed data over the limit raises too."""
    with pytest.raises(DecompressionLimitError):
        decompress(NO_COMPRESSION, b"x" * 11, max_size=10)


@pytest.mark.parametrize(
    "blob",
    [
        XERIAL_MAGIC + b"\x00\x00\x00\x01",  # header cut short
        XERIAL_MAGIC + struct.pack(">ii", 1, 1) + b"\x00\x00",  # block length cut short
        XERIAL_MAGIC + struct.pack(">iii", 1, 1, 100) + b"abc",  # block past the end
        XERIAL_MAGIC + struct.pack(">iii", 1, 1, -5),  # negative block length
        b"\xff\xff\xff\xff\xff\xff",  # raw block with an endless length prefix
    ],
)
def test_malformed_xerial(blob: bytes) -> None:
    """Broken xerial framing raises CorruptRecordError."""
    with pytest.raises(CorruptRecordError):
        decompress(SNAPPY, blob)


def test_module_constants() -> None:
    """Codec ids and names are Kafka's."""
    assert compression.CODEC_NAMES == {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def test_lz4_blocks_are_independent() -> None:
    """Kafka's lz4 reader decompresses each block alone (KIP-57): no linked blocks."""
    data = bytes(range(256)) * 1200  # several 64 KiB blocks
    info = lz4.frame.get_frame_info(compress(LZ4, data))
    assert info["block_linked"] is False


@pytest.mark.parametrize(
    ("data", "digest"),
    [
        (b"", 0x02CC5D05),
        (b"a", 0x550D7456),
        (b"abc", 0x32D153FF),
        (b"Nobody inspects the spammish repetition", 0xE2293B2F),
    ],
)
def test_xxh32_known_values(data: bytes, digest: int) -> None:
    """xxh32 matches the reference implementation's published values."""
    assert compression.xxh32(data) == digest


def test_magic0_lz4_uses_kafka_08_header_checksum() -> None:
    """Magic 0 lz4 frames checksum the magic bytes too (KAFKA-3160); readers ignore it."""
    data = b"old kafka " * 300
    frame = compress(LZ4, data, magic=0)
    hc_at = 6 + (8 if frame[4] & 0x08 else 0)
    assert frame[hc_at] == (compression.xxh32(frame[:hc_at]) >> 8) & 0xFF
    assert frame[hc_at] != (compression.xxh32(frame[4:hc_at]) >> 8) & 0xFF
    assert decompress(LZ4, frame, magic=0) == data
    assert decompress(LZ4, compress(LZ4, data), magic=0) == data  # a correct checksum too
    with pytest.raises(CorruptRecordError):
        decompress(LZ4, frame)  # magic 1 and 2 check the header checksum


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_large_output_in_several_chunks(codec: int) -> None:
    """Outputs larger than one decompression chunk are whole, and the limit stays exact."""
    data = bytes(range(256)) * 4096 + bytes(9 * MIB)
    blob = compress(codec, data)
    assert decompress(codec, blob, max_size=len(data)) == data
    with pytest.raises(DecompressionLimitError):
        decompress(codec, blob, max_size=len(data) - 1)
