"""Consumer-group members in child processes, watched from the test.

:class:`MemberProcess` runs :mod:`tests.group_member` for one client and
keeps what it reports: its current assignment, every assignment it had, and
the records it processed (and committed). ``stop()`` is a clean close,
``kill()`` a SIGKILL. The client library's INFO log goes to a file whose
tail :func:`wait_until` shows when it times out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

WAIT_S = 60.0
LOG_TAIL_LINES = 40


class MemberProcess:
    """One group member (any client) in a child process."""

    def __init__(
        self,
        client: str,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        assignor: str = "range",
        instance_id: str | None = None,
        session_timeout_ms: int = 6000,
        group_protocol: str = "classic",
    ) -> None:
        self.client = client
        command = [sys.executable, "-m", "tests.group_member", client, bootstrap, group, topic]
        command += ["--assignor", assignor, "--session-timeout-ms", str(session_timeout_ms)]
        if instance_id is not None:
            command += ["--instance-id", instance_id]
        command += ["--group-protocol", group_protocol]
        log_fd, self.log_path = tempfile.mkstemp(prefix=f"member-{client}-", suffix=".log")
        os.close(log_fd)
        command += ["--log", self.log_path]
        self.assigned: set[int] = set()
        self.assignments: list[set[int]] = []
        self.processed: list[tuple[int, int, str]] = []
        self.rebalances: list[set[int]] = []
        self.commit_failures: list[str] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._stderr = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            with self._lock:
                if event["event"] == "assigned":
                    self.assigned = set(event["partitions"])
                    self.assignments.append(set(event["partitions"]))
                elif event["event"] == "commit_failed":
                    self.commit_failures.append(event["error"])
                elif event["event"] == "rebalance":
                    self.rebalances.append(set(event["partitions"]))
                elif event["event"] == "processed":
                    self.processed.extend(tuple(r) for r in event["records"])

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the client library's log."""
        with open(self.log_path, errors="replace") as log:
            return "".join(log.readlines()[-lines:])

    def records(self) -> list[tuple[int, int, str]]:
        with self._lock:
            return list(self.processed)

    def stop(self, timeout: float = 30.0) -> None:
        """Close the consumer cleanly and wait for the process to exit."""
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.write("stop\n")
            self.process.stdin.flush()
            self.process.wait(timeout)
        self._reader.join(5)

    def kill(self) -> None:
        """SIGKILL: the member vanishes without leaving its group."""
        self.process.kill()
        self.process.wait()
        self._reader.join(5)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        Path(self.log_path).unlink(missing_ok=True)


def wait_until(
    condition: Callable[[], bool], what: str, members: Iterable[MemberProcess] = ()
) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` (and the members' stderr)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    details = "\n".join(
        f"{m.client}: assigned={sorted(m.assigned)} processed={len(m.processed)} "
        f"commit failures={m.commit_failures[-3:]} "
        f"stderr={''.join(m.errors)[-2000:]}\nlog:\n{m.log_tail()}"
        for m in members
    )
    raise AssertionError(f"timed out waiting for {what}\n{details}")


def partitions_split(members: list[MemberProcess], partitions: int) -> bool:
    """Every partition owned by exactly one member and every member owning some."""
    owned = [m.assigned for m in members]
    total = sum(len(o) for o in owned)
    union = set().union(*owned)
    return total == partitions and union == set(range(partitions)) and all(owned)
