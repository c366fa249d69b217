"""``kafkette serve``'s safe defaults, end to end: the pre-authentication frame cap
(``sasl.server.max.receive.size``), the refusal to serve unauthenticated clients
outside loopback by accident, and a damaged credentials file stopping the start."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkette import Producer
from kafkette.server.sasl.users import CREDENTIALS_FILE
from tests.brokers import BrokerProcess, kafkette_broker

CAP = 1000


@pytest.fixture(scope="module")
def server() -> Iterator[BrokerProcess]:
    yield from kafkette_broker(
        None, "--sasl-user", "alice:pw", "--set", f"sasl.server.max.receive.size={CAP}"
    )


def wait_for_log(server: BrokerProcess, text: str) -> str:
    deadline = time.monotonic() + 5
    while text not in (log := server.log()):
        assert time.monotonic() < deadline, log
        time.sleep(0.02)
    return log


@pytest.mark.parametrize("size", [CAP + 1, 100 * 1024 * 1024])
def test_a_frame_over_the_cap_before_authentication_closes_the_connection(
    server: BrokerProcess, size: int
) -> None:
    """Only the size prefix is read: the connection closes, nothing is buffered or served."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", size) + b"\0" * 64)
        assert sock.recv(100) == b""
    wait_for_log(server, f"frame of {size} bytes")


def test_after_authentication_frames_may_be_large(server: BrokerProcess) -> None:
    """The cap is lifted once the client authenticates: a 20 kB record is produced."""
    settings = {
        "bootstrap.servers": server.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "pw",
    }
    with Producer(settings) as producer:
        future = producer.send("big", b"x" * 20_000, partition=0)
        producer.flush()
        assert future.result().offset == 0


def serve(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kafkette", "serve", *argv],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_serve_refuses_plaintext_outside_loopback() -> None:
    result = serve("--listen", "0.0.0.0:0", "--memory")
    assert result.returncode == 2
    assert result.stderr == (
        "kafkette serve: configuration setting '--listen': 0.0.0.0 is reachable from other "
        "machines and clients would not authenticate; give SASL users (--sasl-user, "
        "--sasl-users-file), name the listener (--listener PLAINTEXT://0.0.0.0:0) or pass "
        "--allow-plaintext-outside\n"
    )


def test_a_damaged_credentials_file_stops_the_start(tmp_path: Path) -> None:
    (tmp_path / CREDENTIALS_FILE).write_text("{")
    result = serve("--listen", "127.0.0.1:0", "--data-dir", str(tmp_path), "--sasl-user", "a:b")
    assert result.returncode == 1
    last = result.stderr.splitlines()[-1]
    assert last.startswith(
        f"kafkette serve: cannot read the SCRAM credentials in {tmp_path / CREDENTIALS_FILE}: "
    )
    assert "Traceback" not in result.stderr
