"""Types of the optional C accelerator of the append path (see _append.c)."""

CRC_IMPLEMENTATION: str
"""``"avx512-vpclmulqdq"``, ``"sse4.2"`` or ``"table"``: what computes CRC-32C here."""
CRC_IMPLEMENTATIONS: tuple[str, ...]
"""Every CRC-32C implementation this machine can run, slowest first."""

def check_batch(data: bytes | bytearray | memoryview, check_crc: bool, /) -> tuple[int, ...] | None:
    """The 13 header fields of the one batch in ``data``, or None to leave it to Python."""

def write_batch(
    fd: int, data: bytes | bytearray | memoryview, base_offset: int, leader_epoch: int, /
) -> None:
    """Write the batch in ``data`` to ``fd`` with base offset, length and epoch rewritten."""

def crc32c(data: bytes | bytearray | memoryview, value: int = 0, /) -> int:
    """The CRC-32C of ``data`` continuing from ``value``."""

def crc32c_with(name: str, data: bytes | bytearray | memoryview, /) -> int:
    """The CRC-32C of ``data`` by the named implementation (tests)."""

def bind_log(
    log_type: type, segment_type: type, tracker_type: type, info_type: type, array_type: type, /
) -> None:
    """The SegmentedLog, FileSegment, IndexTracker, AppendInfo and array classes."""

def append_fast(
    log: object, data: bytes | bytearray | memoryview, check_crc: bool, leader_epoch: int, /
) -> object:
    """AppendInfo, header fields (tail left to Python), None (not taken), False (Python's)."""
