"""Types of the optional C accelerator of the append path (see _append.c)."""

def check_batch(data: bytes | bytearray | memoryview, check_crc: bool, /) -> tuple[int, ...] | None:
    """The 13 header fields of the one batch in ``data``, or None to leave it to Python
    (the CRC, when checked, by the crc32c package)."""

def write_batch(
    fd: int, data: bytes | bytearray | memoryview, base_offset: int, leader_epoch: int, /
) -> None:
    """Write the batch in ``data`` to ``fd`` with base offset, length and epoch rewritten."""
