"""A command pointed at an address where no broker listens says so at once, not only
when its call times out (a wrong port must not look like a hang)."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from kafkette.cli import _route_logs
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


@pytest.fixture
def failures_logger() -> Iterator[logging.Logger]:
    """The failures logger, its handlers and propagation put back after the test."""
    logger = logging.getLogger("kafkette.client.failures")
    handlers, propagate = list(logger.handlers), logger.propagate
    yield logger
    logger.handlers[:] = handlers
    logger.propagate = propagate


def test_the_cli_run_twice_in_one_process_shows_a_failure_once_on_the_current_stderr(
    failures_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    _route_logs(debug=False)
    first.close()  # as pytest closes a finished test's captured stderr
    monkeypatch.setattr(sys, "stderr", second)
    _route_logs(debug=False)
    failures_logger.warning("%s", "connecting to 127.0.0.1:1 failed")
    assert second.getvalue() == "kafkette: connecting to 127.0.0.1:1 failed\n"
