"""``kafkette serve --schema-registry`` stops quietly: the registry's idle producer,
cancelled with the broker's task group, loses nothing and logs no error."""

from __future__ import annotations

import signal
import subprocess
import sys

from tests.brokers import free_port


def test_a_registry_broker_stops_without_an_error_line() -> None:
    broker, registry = free_port(), free_port()
    command = [
        sys.executable, "-m", "kafkette", "serve", "--memory",
        "--listener", f"PLAINTEXT://127.0.0.1:{broker}",
        "--schema-registry", f"127.0.0.1:{registry}",
    ]  # fmt: skip
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True) as server:
        assert server.stderr is not None
        lines = []
        for line in server.stderr:
            lines.append(line)
            if "schema registry listening" in line:
                break
        server.send_signal(signal.SIGINT)
        _, rest = server.communicate(timeout=30)
    log = "".join(lines) + rest
    assert "kafkette serve: stopped" in log
    assert " ERROR " not in log, log
