"""A command pointed at an address where no broker listens says so at once, not only
when its call times out (a wrong port must not look like a hang)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.brokers import free_port


def test_a_refused_connection_is_shown_at_once_and_once() -> None:
    port = free_port()  # nothing listens there
    command = [sys.executable, "-m", "kafkette", "topics", "list", "-b", f"127.0.0.1:{port}"]
    environment = {k: v for k, v in os.environ.items() if k != "KAFKETTE_BOOTSTRAP_SERVERS"}
    started = time.monotonic()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    )
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        shown_after = time.monotonic() - started
        time.sleep(2)  # retries keep failing meanwhile (backoff well under a second)
    finally:
        process.kill()
        _, rest = process.communicate(timeout=30)
    assert first == (
        f"kafkette: connecting to 127.0.0.1:{port} failed: Connection refused: is a broker "
        "listening at this address? check bootstrap.servers, and the address the broker "
        "advertises (advertised.listeners)\n"
    )
    assert (
        shown_after < 15
    )  # the interpreter's start and a refused connect; the call's timeout is 60 s
    assert "Connection refused" not in rest  # once, not at each retry
