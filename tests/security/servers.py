"""``kafkette serve`` with named listeners, and the certificates the TLS tests use.

:class:`ListenerBroker` starts the broker with ``--listener`` options (all on
port 0) and reads each listener's bound port from its start-up line.
:class:`Pki` is a CA made at test time (trustme) with a server certificate
for 127.0.0.1 and client certificates, written as PEM files; ``stranger`` is
a second CA the broker does not trust.

Every test of a TLS listener runs on both storages (:data:`STORAGES`,
:func:`storage_args`): a memory log and a disk log hand their records to the
connection differently (views, file regions), and a TLS consumer of a disk
broker once got nothing while every TLS test, all on memory, passed.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trustme

START_TIMEOUT_S = 20.0
STORAGES = ["memory", "disk"]
"""The storages a TLS test runs on (a fixture's ``params``)."""
_LISTENERS = re.compile(r"kafkette serve: listeners (.*)$", re.MULTILINE)
_ONE = re.compile(r"([A-Z_]+)://[^,]*:(\d+) \(")


class Pki:
    """PEM files of a test CA, the broker's certificate and client certificates."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ca = trustme.CA(organization_name="kafkette tests")
        self.stranger = trustme.CA(organization_name="someone else")
        self.ca_file = self._write("ca.pem", self.ca.cert_pem.bytes())
        server = self.ca.issue_cert("127.0.0.1", "localhost")
        self.server_cert = self._write("server.pem", server.cert_chain_pems[0].bytes())
        self.server_key = self._write("server.key", server.private_key_pem.bytes())

    def _write(self, name: str, data: bytes) -> str:
        path = self.directory / name
        path.write_bytes(data)
        return str(path)

    def client(self, name: str, *, trusted: bool = True) -> tuple[str, str]:
        """(certificate file, key file) of a client ``CN=name,OU=clients,O=kafkette tests``."""
        ca = self.ca if trusted else self.stranger
        cert = ca.issue_cert(
            f"{name}@example.org",
            common_name=name,
            organization_name="kafkette tests",
            organization_unit_name="clients",
        )
        prefix = name if trusted else f"{name}-untrusted"
        return (
            self._write(f"{prefix}.pem", cert.cert_chain_pems[0].bytes()),
            self._write(f"{prefix}.key", cert.private_key_pem.bytes()),
        )

    def server_properties(self, client_auth: str = "required") -> list[str]:
        return [
            "--set",
            f"ssl.certificate.location={self.server_cert}",
            "--set",
            f"ssl.key.location={self.server_key}",
            "--set",
            f"ssl.ca.location={self.ca_file}",
            "--set",
            f"ssl.client.auth={client_auth}",
        ]


def storage_args(storage: str, directory: Path) -> list[str]:
    """``kafkette serve``'s storage option for ``storage`` (one of :data:`STORAGES`): the
    disk log in a new directory under ``directory``, or ``--memory``."""
    if storage == "memory":
        return ["--memory"]
    assert storage == "disk", storage
    return ["--data-dir", tempfile.mkdtemp(prefix="data-", dir=directory)]


class ListenerBroker:
    """``kafkette serve`` with the given arguments (which name the listeners), storing in
    memory unless they name a ``--data-dir``."""

    def __init__(self, *args: str) -> None:
        self.args = args
        self.ports: dict[str, int] = {}
        self.process: subprocess.Popen[str] | None = None
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed in close())
            prefix="kafkette-serve-", suffix=".log", delete=False
        )

    def start(self) -> ListenerBroker:
        named = {"--memory", "--data-dir"} & set(self.args)
        storage = [] if named else ["--memory"]
        command = [sys.executable, "-m", "kafkette", "serve", *storage, *self.args]
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, text=True
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            match = _LISTENERS.search(self.log())
            if match:
                self.ports = {name: int(port) for name, port in _ONE.findall(match.group(1))}
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"kafkette serve exited early:\n{self.log()}")
            time.sleep(0.02)
        self.close()
        raise RuntimeError(f"kafkette serve did not start:\n{self.log()}")

    def bootstrap(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    def log(self) -> str:
        return Path(self._log.name).read_text()

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
