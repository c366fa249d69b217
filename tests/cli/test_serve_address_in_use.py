"""``kafkette serve`` on an address another process holds: one error line naming the
address, exit status 1, no traceback, for the first listener and for an extra one."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest


@pytest.fixture
def taken() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as holder:
        yield holder.getsockname()[1]


@pytest.mark.parametrize("which", ["first", "extra"])
def test_an_address_in_use_is_one_line(taken: int, which: str) -> None:
    listeners = (
        f"PLAINTEXT://127.0.0.1:{taken}"
        if which == "first"
        else f"PLAINTEXT://127.0.0.1:0,EXTRA://127.0.0.1:{taken}"
    )
    args = ["--memory", "--listener", listeners]
    if which == "extra":
        args += ["--set", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT"]
    done = subprocess.run(
        [sys.executable, "-m", "kafkette", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("kafkette serve: [")]
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert errors == [
        f"kafkette serve: [Errno 98] Address already in use (while attempting to bind on "
        f"address ('127.0.0.1', {taken}))"
    ]
