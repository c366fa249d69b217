""":class:`DocContext`: what the examples of one document share while they run."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path

from tests.brokers import BrokerProcess
from tests.docs import zygote
from tests.docs.shell import BrokerExample, Command, first_missing, run

ADDRESS = "localhost:9092"
"""The broker address the docs write (Kafka's default): it stands for the document's broker."""
BIN = Path(sys.executable).parent
"""The virtual environment's scripts, ``kafkette`` among them."""


class DocContext:
    """One document's work directory (the current directory of its commands, where the
    files they name are made), its broker, and what its test set-ups left open.

    The broker is the last ``kafkette serve`` example of the document still running,
    else a ``kafkette serve --memory`` on a free port started when first needed.
    """

    def __init__(self, document: Path, work: Path) -> None:
        self.document = document
        self.work = work
        self.replacements: dict[str, str] = {}
        """Text of the doc standing for something of the test's (a data directory ...)."""
        self._broker: BrokerProcess | None = None
        self._example: BrokerExample | None = None
        self._zygote: zygote.Zygote | None = None
        self._cleanups: list[Callable[[], object]] = []

    @property
    def servers(self) -> str:
        """The bootstrap servers of the document's broker (started if need be)."""
        if self._example is not None:
            return self._example.address
        if self._broker is None:
            broker = BrokerProcess()
            try:
                broker.start()
            except BaseException:
                broker.close()
                raise
            self._broker = broker
        return self._broker.bootstrap

    def fresh_broker(self) -> str:
        """Replace the default broker by a new one (producer ids from 0 again ...)."""
        if self._broker is not None:
            broker, self._broker = self._broker, None
            broker.close()
        return self.servers

    def substitute(self, text: str) -> str:
        """``text`` with the doc's addresses and paths replaced by the test's."""
        if ADDRESS in text:
            text = text.replace(ADDRESS, self.servers)
        return self.replaced(text)

    def replaced(self, text: str) -> str:
        """``text`` with the set-ups' :attr:`replacements` made."""
        for doc_text, ours in self.replacements.items():
            text = text.replace(doc_text, ours)
        return text

    def environment(self, *, client: bool = True) -> dict[str, str]:
        """The commands' environment: the venv's ``kafkette`` first on PATH (for a client
        command, the zygote's stand-in; see tests/docs/zygote.py) and
        ``KAFKETTE_BOOTSTRAP_SERVERS`` the document's broker."""
        env = dict(os.environ)
        path = [str(BIN), env.get("PATH", "")]
        env.pop("KAFKETTE_BOOTSTRAP_SERVERS", None)
        if client:
            env["KAFKETTE_BOOTSTRAP_SERVERS"] = self.servers
            if zygote.enabled():
                if self._zygote is None:
                    self._zygote = zygote.Zygote()
                path.insert(0, str(self._zygote.bin))
        env["PATH"] = os.pathsep.join(path)
        return env

    def run(self, command: Command) -> None:
        """Run one command of a shell example and check it (see tests/docs/shell.py)."""
        if command.is_broker:
            self._serve(command)
            return
        text = self.substitute(command.text)
        result = run(command, text, self.work, self.environment())
        shown = [self.substitute(line) for line in command.output]
        output = result.stdout.splitlines() + result.stderr.splitlines()
        missing = first_missing(shown, output, whole=True)
        if result.status != command.expected_status or missing is not None:
            problem = (
                f"exit status {result.status}, not {command.expected_status}"
                if missing is None
                else f"no line like {missing!r}"
            )
            raise AssertionError(
                f"{self.document.name} line {command.line}: {problem}\n$ {text}\n"
                f"--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
            )

    def _serve(self, command: Command) -> None:
        self.stop_example()
        shown = dataclasses.replace(
            command, output=[self.replaced(line) for line in command.output]
        )
        self._example = BrokerExample(shown, self.work, self.environment(client=False))
        self._example.check_log()

    def stop_example(self) -> None:
        """Stop the running ``kafkette serve`` example, if any (it must exit 0)."""
        if self._example is not None:
            example, self._example = self._example, None
            example.stop()

    def later(self, cleanup: Callable[[], object]) -> None:
        """Call ``cleanup`` before the next set-up, or when the document is done."""
        self._cleanups.append(cleanup)

    def clean_up(self) -> None:
        while self._cleanups:
            self._cleanups.pop()()

    def close(self) -> None:
        try:
            self.clean_up()
            self.stop_example()
        finally:
            if self._example is not None:
                self._example.kill()
            if self._broker is not None:
                self._broker.close()
            if self._zygote is not None:
                self._zygote.close()
