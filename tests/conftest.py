"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.brokers import BrokerProcess, TansuProcess, kafkette_broker, tansu_broker

LONG_FIRST = (
    "tests/spark_integration/",
    "tests/server/test_fuzz.py",
    "tests/cli/test_tansu.py",
    "tests/cli/test_file_bootstrap.py",
    "tests/cli/test_admin_commands.py",
)
"""Files of minutes (Spark sessions, fuzzing, subprocess brokers), collected first."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, the rest in their order. With ``--no-loadscope-reorder``
    (scripts/test.sh) pytest-xdist hands files to its workers in collection order; by
    default it hands out the files of most tests first, which left the Spark files (few
    tests of a minute each) to the end: a tail of minutes on a worker or two."""
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))


@pytest.fixture
def memory_broker() -> Iterator[BrokerProcess]:
    """``kafkette serve --memory`` on a free port."""
    yield from kafkette_broker(None)


@pytest.fixture
def disk_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """``kafkette serve --data-dir`` on a free port, in a fresh directory."""
    yield from kafkette_broker(tmp_path / "data")


@pytest.fixture(params=["memory", "disk"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerProcess]:
    """The broker on each storage backend in turn."""
    data_dir = tmp_path / "data" if request.param == "disk" else None
    yield from kafkette_broker(data_dir)


@pytest.fixture
def tansu() -> Iterator[TansuProcess]:
    """The Tansu broker (memory storage) on a free port."""
    yield from tansu_broker()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Async tests marked ``@pytest.mark.anyio`` run on asyncio and on trio."""
    return str(request.param)
