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
