"""kafkette's pytest plugin: Kafka fixtures for users' tests.

Installed with kafkette (a ``pytest11`` entry point), so pytest loads it by
itself; ``-p no:kafkette`` turns it off. Fixtures:

- ``kafka_cluster``: a fresh :class:`~kafkette.testing.MemoryCluster` per test
  (clock, faults, read-outs), closed afterwards;
- ``kafka_clock``: that cluster's :class:`~kafkette.testing.ManualClock`;
- ``kafka_bootstrap_servers``: where the test's clients connect: the memory
  cluster, or the ``--kafka-bootstrap`` servers;
- ``kafka_admin``: a sync :class:`~kafkette.AdminClient` on those servers;
- ``schema_registry``: a :class:`~kafkette.schema_registry.SchemaRegistryClient`
  of ``kafka_cluster``'s in-process registry (``kafka_cluster.schema_registry_url``);
- ``kafka_topic``: a factory, ``kafka_topic(partitions=3, **configs) -> name``,
  creating a topic with a fresh name (deleted afterwards on a real cluster);
- ``kafka_broker``: a real ``kafkette serve --memory --enable-fault-injection``
  process on a free loopback port for the whole session
  (``.bootstrap_servers``, and ``.faults``: a
  :class:`~kafkette.testing.RemoteFaults` with the API of
  ``MemoryCluster.faults``; the broker is shared, so a test that arms faults
  clears them).

``pytest --kafka-bootstrap HOST:PORT`` points ``kafka_bootstrap_servers``,
``kafka_admin``, ``kafka_topic`` and ``kafka_broker`` at a running Kafka
instead, so a suite written against them runs unchanged on memory://,
``kafkette serve`` and a real cluster. ``kafka_cluster`` and ``kafka_clock``
are the memory cluster's own (time is not a remote control), and fail a test
that asks for them under ``--kafka-bootstrap``. ``kafka_broker.faults`` is
there too and works when the servers are a ``kafkette serve
--enable-fault-injection``; any other Kafka refuses it (InvalidConfigError).

kafkette is imported when a fixture is first used, not when pytest loads the
plugin, so suites that use none of them pay nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kafkette import AdminClient
    from kafkette.schema_registry import SchemaRegistryClient
    from kafkette.testing import ManualClock, MemoryCluster, RemoteFaults

BOOTSTRAP_OPTION = "--kafka-bootstrap"
START_TIMEOUT_S = 30.0
_LISTENING = re.compile(r"listening on ([0-9.]+):(\d+)")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafkette", "kafkette Kafka fixtures")
    group.addoption(
        BOOTSTRAP_OPTION,
        dest="kafka_bootstrap",
        default=None,
        metavar="SERVERS",
        help="run the kafka_* fixtures against this running Kafka (host:port,...) "
        "instead of an in-process memory:// cluster",
    )


def _external(config: pytest.Config) -> str | None:
    value = config.getoption("kafka_bootstrap", default=None)
    return str(value) if value else None


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[MemoryCluster]:
    """A fresh in-process Kafka (``MemoryCluster``) for this test, closed after it."""
    if _external(request.config) is not None:
        pytest.fail(
            f"kafka_cluster is an in-process cluster (clock, faults): it does not exist "
            f"under {BOOTSTRAP_OPTION}; use kafka_bootstrap_servers for tests that run on both"
        )
    from kafkette.testing import MemoryCluster

    with MemoryCluster() as cluster:
        yield cluster


@pytest.fixture
def schema_registry(kafka_cluster: MemoryCluster) -> Iterator[SchemaRegistryClient]:
    """A schema registry client of ``kafka_cluster``'s registry (in-process), closed after."""
    from kafkette.schema_registry import SchemaRegistryClient

    with SchemaRegistryClient(kafka_cluster.schema_registry_url) as client:
        yield client


@pytest.fixture
def kafka_clock(kafka_cluster: MemoryCluster) -> ManualClock:
    """The broker clock of ``kafka_cluster`` (move it with ``kafka_cluster.advance``)."""
    from kafkette.testing import ManualClock

    clock = kafka_cluster.clock
    assert isinstance(clock, ManualClock)
    return clock


@pytest.fixture
def kafka_bootstrap_servers(request: pytest.FixtureRequest) -> str:
    """``bootstrap_servers`` for this test's clients: ``--kafka-bootstrap``, or
    ``kafka_cluster``'s memory:// url."""
    external = _external(request.config)
    if external is not None:
        return external
    cluster: MemoryCluster = request.getfixturevalue("kafka_cluster")
    return cluster.bootstrap_servers


@pytest.fixture
def kafka_admin(kafka_bootstrap_servers: str) -> Iterator[AdminClient]:
    """A sync admin client on ``kafka_bootstrap_servers``, closed after the test."""
    from kafkette import AdminClient

    with AdminClient(bootstrap_servers=kafka_bootstrap_servers) as admin:
        yield admin


@pytest.fixture
def kafka_topic(
    request: pytest.FixtureRequest, kafka_admin: AdminClient
) -> Iterator[Callable[..., str]]:
    """``kafka_topic(partitions=3, **configs) -> name``: a new topic with a fresh name.

    ``configs`` are topic configs in Python spelling (``cleanup_policy="compact"``
    is ``cleanup.policy``) or Kafka's, passed as ``**{"cleanup.policy": ...}``.
    On a real cluster the topics are deleted after the test.
    """
    from kafkette import NewTopic

    made: list[str] = []

    def create(partitions: int = 3, **configs: Any) -> str:
        name = f"topic-{uuid.uuid4().hex[:12]}"
        settings = {key.replace("_", "."): str(value) for key, value in configs.items()}
        kafka_admin.create_topics([NewTopic(name, partitions, configs=settings)]).all()
        made.append(name)
        return name

    yield create
    if made and _external(request.config) is not None:
        kafka_admin.delete_topics(made).all()


class _RemoteFaultsOwner:
    """Gives ``.faults``, a :class:`~kafkette.testing.RemoteFaults` on ``.bootstrap_servers``
    made on first use."""

    bootstrap_servers: str
    _faults: RemoteFaults | None = None

    @property
    def faults(self) -> RemoteFaults:
        """The broker's faults, armed over the network (see :class:`RemoteFaults`)."""
        if self._faults is None:
            from kafkette.testing import RemoteFaults

            self._faults = RemoteFaults(self.bootstrap_servers)
        return self._faults

    def _close_faults(self) -> None:
        if self._faults is not None:
            self._faults.close()
            self._faults = None


class ServeProcess(_RemoteFaultsOwner):
    """``kafkette serve --memory --enable-fault-injection`` in a child process on a free
    loopback port."""

    def __init__(self) -> None:
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        fd, self._log_path = tempfile.mkstemp(prefix="kafkette-serve-", suffix=".log")
        self._log_fd = fd

    @property
    def bootstrap_servers(self) -> str:  # type: ignore[override]
        return f"127.0.0.1:{self.port}"

    def start(self) -> ServeProcess:
        command = [sys.executable, "-m", "kafkette", "serve", "--listen", "127.0.0.1:0", "--memory"]
        command.append("--enable-fault-injection")
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=self._log_fd, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            text = Path(self._log_path).read_text(errors="replace")
            match = _LISTENING.search(text)
            if match:
                self.port = int(match.group(2))
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"kafkette serve exited early:\n{text}")
            time.sleep(0.02)
        self.close()
        raise RuntimeError(f"kafkette serve did not start within {START_TIMEOUT_S}s")

    def close(self) -> None:
        self._close_faults()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log_fd >= 0:
            os.close(self._log_fd)
            os.unlink(self._log_path)
            self._log_fd = -1


class ExternalKafka(_RemoteFaultsOwner):
    """The ``--kafka-bootstrap`` cluster, standing in for ``kafka_broker``."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[ServeProcess | ExternalKafka]:
    """A real Kafka over TCP for the session: ``kafkette serve --memory
    --enable-fault-injection`` on a free loopback port (stopped at the end), or the
    ``--kafka-bootstrap`` cluster; ``.faults`` arms faults on it (:class:`RemoteFaults`)."""
    external = _external(request.config)
    if external is not None:
        kafka = ExternalKafka(external)
        try:
            yield kafka
        finally:
            kafka._close_faults()
        return
    server = ServeProcess()
    try:
        yield server.start()
    finally:
        server.close()
