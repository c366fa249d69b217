"""validate_batch: the C check (framing, magic, control flag, CRC in one call) and the
pure-Python checks accept the same batches and refuse the others with the same error."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.backends import speedups
from kafkette.backends.config import LogConfig
from kafkette.backends.header import parse_header
from kafkette.backends.memory import MemoryLog
from kafkette.errors import ApiError, CorruptMessageError, InvalidRecordError
from kafkette.protocol.records.batch_header import batch_crc
from kafkette.server.handlers import produce
from tests.server.dataplane import NOW, batch

Outcome = tuple[object, ...]

ONE_BATCH = "a produce request must carry exactly one record batch per partition"
VALID = batch([(b"k", b"v" * 40), (None, b"w")], producer_id=3, producer_epoch=0, base_sequence=0)


def _now() -> int:
    return NOW


def _outcome(
    data: bytes, version: int = 11, log: MemoryLog | None = None, *, c_check: bool
) -> Outcome:
    """What validate_batch makes of ``data``: the header, or the error's class and text."""
    log = log or MemoryLog("t", 0, LogConfig())
    check = produce._check_batch
    try:
        if not c_check:
            produce._check_batch = None
        try:
            return ("ok", produce.validate_batch(data, log.config, version, _now))
        except ApiError as exc:
            return ("error", type(exc), exc.detail)
    finally:
        produce._check_batch = check


def _both(data: bytes, version: int = 11, log: MemoryLog | None = None) -> Outcome:
    python = _outcome(data, version, log, c_check=False)
    if speedups.check_batch is not None:
        assert _outcome(data, version, log, c_check=True) == python
    return python


def _recrc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 17, batch_crc(data, 0, len(data)))
    return bytes(data)


def test_the_c_check_is_used_when_built() -> None:
    """The handler takes the compiled check whenever the backend's accelerator is loaded."""
    assert produce._check_batch is speedups.check_batch


def test_a_valid_batch_gives_its_header_on_both_paths() -> None:
    assert _both(VALID) == ("ok", parse_header(VALID))


def _patched(offset: int, fmt: str, value: int, *, recrc: bool = True) -> bytes:
    data = bytearray(VALID)
    struct.pack_into(fmt, data, offset, value)
    return _recrc(data) if recrc else bytes(data)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (VALID[:60], (CorruptMessageError, "record batch header needs 61 bytes")),
        (
            VALID[:-1],
            (CorruptMessageError, f"record batch of {len(VALID)} bytes runs past the request"),
        ),
        (VALID + VALID, (InvalidRecordError, ONE_BATCH)),
        (
            _patched(16, ">b", 1, recrc=False),
            (InvalidRecordError, "produce v11 accepts only magic 2 record batches, got magic 1"),
        ),
        (_patched(8, ">i", 40), (CorruptMessageError, "record batch length 40 is too small")),
        (_patched(70, ">b", 0, recrc=False), (CorruptMessageError, "record batch fails its CRC")),
        (_patched(21, ">h", 0x20), (InvalidRecordError, "clients may not write control batches")),
        (
            _patched(57, ">i", 5),
            (InvalidRecordError, "record count 5 does not match last offset delta 1"),
        ),
        (
            _patched(57, ">i", 0),
            (InvalidRecordError, "record count 0 does not match last offset delta 1"),
        ),
        (
            _patched(23, ">i", -1),
            (InvalidRecordError, "record count 2 does not match last offset delta -1"),
        ),
        (
            _patched(53, ">i", -1),
            (InvalidRecordError, "batch of producer 3 has no sequence number"),
        ),
    ],
)
def test_each_refusal_is_the_same_on_both_paths(data: bytes, expected: tuple[object, str]) -> None:
    assert _both(data) == ("error", *expected)


def test_zstd_before_v7_and_the_size_limit_on_both_paths() -> None:
    zstd = _patched(21, ">h", 4)  # a zstd batch (the records are not decoded here)
    assert _both(zstd, version=6) == (
        "error",
        produce.UnsupportedCompressionTypeError,
        "zstd batches need produce v7+, got v6",
    )
    assert _both(zstd, version=7) == ("ok", parse_header(zstd))
    small = MemoryLog("t", 0, LogConfig(max_message_bytes=len(VALID) - 1))
    assert _both(VALID, log=small) == (
        "error",
        produce.MessageTooLargeError,
        f"batch of {len(VALID)} bytes exceeds max.message.bytes ({len(VALID) - 1})",
    )


def _mutations() -> st.SearchStrategy[Callable[[bytes], bytes]]:
    def flip(position: int, value: int, recrc: bool) -> Callable[[bytes], bytes]:
        def apply(data: bytes) -> bytes:
            out = bytearray(data)
            if not out:
                return data
            out[position % len(out)] = value
            return _recrc(out) if recrc and len(out) >= 21 else bytes(out)

        return apply

    def cut(size: int) -> Callable[[bytes], bytes]:
        return lambda data: data[:size]

    def extend(extra: bytes) -> Callable[[bytes], bytes]:
        return lambda data: data + extra

    return st.one_of(
        st.builds(flip, st.integers(0, 200), st.integers(0, 255), st.booleans()),
        st.builds(cut, st.integers(0, len(VALID))),
        st.builds(extend, st.binary(min_size=1, max_size=70)),
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(_mutations(), min_size=1, max_size=3), st.sampled_from([3, 6, 7, 11]))
def test_mutated_batches_get_the_same_answer_on_both_paths(
    mutations: list[Callable[[bytes], bytes]], version: int
) -> None:
    data = VALID
    for mutate in mutations:
        data = mutate(data)
    _both(data, version)
