"""The shell examples of the docs, run as a user runs them.

A ```bash (or ```sh) block is one command a line (a line ending in ``\\`` goes on);
blank lines and ``#`` lines are left out. A ```console block shows commands after
``$ `` and, under each, what it prints: the key output, checked.

Each command runs under ``bash -o pipefail`` in the document's work directory,
with the virtual environment's ``kafkette`` first on PATH (for client commands,
a stand-in that runs it without a second of start-up: tests/docs/zygote.py) and
``KAFKETTE_BOOTSTRAP_SERVERS`` naming the document's broker (the default of
every client subcommand). It must exit 0, or 1 when the doc shows it printing a
Kafka error (``kafkette CMD: NAME (CODE): ...``, as docs/cli.md describes exit
statuses). A ``kafkette consume`` that follows its topics (no ``-e``, ``-c`` or
``e@`` end) is stopped as a user stops it, with Ctrl-C (SIGINT to its process
group) once it has printed and gone quiet, and must then exit 130.

A ``kafkette serve`` example starts in the background and serves the
document's next examples, until the next one starts or the document ends; its
addresses become ``127.0.0.1:0`` (a free port), and one that names no listener
gets ``--listen 127.0.0.1:0`` instead of the default port 9092. The lines it
logs at start are checked against the ones the doc shows; stopped with SIGINT,
it must exit 0.

The doc's output lines are compared after squeezing blanks and reading every
run of digits as any number (ports, offsets, times and ids vary); ``...`` stands
for anything. They must appear in that order; a command's lines must match
whole lines, a broker's may be part of a log line.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

COMMAND_TIMEOUT_S = 60.0
"""The longest a command may take (the slowest in the docs takes a few seconds)."""
QUIET_S = 1.0
"""How long a following consumer must have printed nothing before it is interrupted."""
START_TIMEOUT_S = 30.0
"""The longest a broker example may take to log that it listens, and the log its lines."""

_CLI_ERROR = re.compile(r"kafkette [a-z -]+: [A-Z_]+ \(-?\d+\): ")
_LISTENING = re.compile(r"kafkette serve: listening on (\S+):(\d+) ")
_ADDRESS = re.compile(r"\b(?:localhost|127\.0\.0\.1|0\.0\.0\.0):\d+\b")


@dataclasses.dataclass
class Command:
    """One command of a block: its line in the document, its text, the output shown."""

    line: int
    text: str
    output: list[str] = dataclasses.field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        """The words of the command (continuation lines joined, comments left out)."""
        return shlex.split(self.text.replace("\\\n", " "), comments=True)

    @property
    def is_broker(self) -> bool:
        return self.argv[:2] == ["kafkette", "serve"]

    @property
    def follows(self) -> bool:
        """A ``kafkette consume`` that runs until interrupted (no ``-e``, ``-c``, ``e@``)."""
        argv = self.argv
        if argv[:2] != ["kafkette", "consume"]:
            return False
        return not {"-e", "-c"} & set(argv) and not any(a.startswith("e@") for a in argv)

    @property
    def expected_status(self) -> int:
        if self.follows:
            return 130
        shown = [line for line in self.output if line.strip()]
        return 1 if shown and _CLI_ERROR.match(shown[0]) else 0


def parse_block(source: str, first_line: int, *, console: bool) -> list[Command]:
    """The commands of a block whose first line is ``first_line`` of its document."""
    commands: list[Command] = []
    continued: Command | None = None
    for number, text in enumerate(source.splitlines(), start=first_line):
        if continued is not None:
            continued.text += "\n" + text
        elif console and not text.startswith("$ "):
            if not commands:
                raise ValueError(f"line {number}: output before the first '$ ' command")
            commands[-1].output.append(text)
            continue
        elif console:
            commands.append(Command(number, text[2:]))
        elif text.strip() and not text.lstrip().startswith("#"):
            commands.append(Command(number, text))
        else:
            continue
        continued = commands[-1] if text.rstrip().endswith("\\") else None
    return commands


def shape(line: str) -> str:
    """A line with blanks squeezed and every number read as 0."""
    return re.sub(r"\d+", "0", " ".join(line.split()))


def first_missing(shown: Sequence[str], actual: Sequence[str], *, whole: bool) -> str | None:
    """The first non-blank line of ``shown`` not found, in order, in ``actual``; None if
    all are (see the module docstring for how lines compare)."""
    lines = [shape(line) for line in actual]
    index = 0
    for line in shown:
        if not line.strip():
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in shape(line).split("...")))
        match = pattern.fullmatch if whole else pattern.search
        while index < len(lines) and not match(lines[index]):
            index += 1
        if index == len(lines):
            return line
        index += 1
    return None


@dataclasses.dataclass
class Result:
    status: int
    stdout: str
    stderr: str


def run(command: Command, text: str, cwd: Path, env: Mapping[str, str]) -> Result:
    """Run ``text`` (the command with the document's addresses substituted) in bash."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            ["bash", "-o", "pipefail", "-c", text],
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,  # its own process group, as a terminal's job
        )
        try:
            if command.follows:
                _interrupt_when_quiet(process, out)
            status = process.wait(COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise AssertionError(
                f"line {command.line}: still running after {COMMAND_TIMEOUT_S} s: {text}\n"
                + _read(out)
                + _read(err)
            ) from None
        return Result(status, _read(out), _read(err))


def _interrupt_when_quiet(process: subprocess.Popen[bytes], out: IO[bytes]) -> None:
    """Ctrl-C once the command has printed something and then nothing for QUIET_S."""
    deadline = time.monotonic() + COMMAND_TIMEOUT_S
    size, changed = 0, time.monotonic()
    while process.poll() is None and time.monotonic() < deadline:
        now_size = os.fstat(out.fileno()).st_size
        if now_size != size:
            size, changed = now_size, time.monotonic()
        elif size and time.monotonic() - changed >= QUIET_S:
            break
        time.sleep(0.05)
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)


def _read(file: IO[bytes]) -> str:
    file.seek(0)
    return file.read().decode("utf-8", "backslashreplace")


def broker_argv(command: Command) -> list[str]:
    """A ``kafkette serve`` example's words, listening on free loopback ports."""
    argv = [_ADDRESS.sub("127.0.0.1:0", word) for word in command.argv]
    names_a_listener = any(
        word in ("--listen", "--listener") or word.startswith("listeners=") for word in argv
    )
    return argv if names_a_listener else [*argv, "--listen", "127.0.0.1:0"]


class BrokerExample:
    """A ``kafkette serve`` example running in the background."""

    def __init__(self, command: Command, cwd: Path, env: Mapping[str, str]) -> None:
        self.command = command
        self.argv = broker_argv(command)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop() or kill())
        self.process = subprocess.Popen(
            self.argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while (match := _LISTENING.search(self.log())) is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                message = self._failure("did not start")
                self.kill()
                raise AssertionError(message)
            time.sleep(0.02)
        self.address = f"{match.group(1)}:{match.group(2)}"

    def log(self) -> str:
        return _read(self._log)

    def check_log(self) -> None:
        """Wait until the broker has logged the lines the doc shows, in order."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while missing := first_missing(self.command.output, self.log().splitlines(), whole=False):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(self._failure(f"never logged {missing!r}"))
            time.sleep(0.05)

    def stop(self) -> None:
        """Ctrl-C; it must exit 0 (raises AssertionError with its log otherwise)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        status = self.process.returncode
        try:
            if status != 0:
                raise AssertionError(self._failure(f"exited with status {status}"))
        finally:
            self._log.close()

    def kill(self) -> None:
        """SIGKILL (after a failure: its exit status no longer matters)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._log.close()

    def _failure(self, what: str) -> str:
        return f"line {self.command.line}: {shlex.join(self.argv)} {what}; its log:\n{self.log()}"
