"""Fixtures running the behavioural suite against both backends, and the append tests
against both append paths (the C accelerator, when built, and pure Python)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import kafkette.backends.disk.segment as disk_segment
import kafkette.backends.segmented as segmented
from kafkette.backends import speedups
from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog
from kafkette.backends.memory import MemoryLog
from kafkette.backends.segmented import SegmentedLog
from tests.backends.helpers import FakeClock

LogFactory = Callable[..., SegmentedLog]

APPEND_IMPLEMENTATIONS = ["c", "python"] if speedups.EXTENSION_USED else ["python"]
# Modules whose every test runs with each append implementation; the others use the
# default one (C when built and not disabled by KAFKETTE_NO_EXTENSIONS=1).
# (test_append_speedups compares the two paths itself.)
BOTH_APPEND_PATHS = ("test_append_paths",)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.module.__name__.endswith(BOTH_APPEND_PATHS):
        metafunc.parametrize("append_implementation", APPEND_IMPLEMENTATIONS, indirect=True)


@pytest.fixture(autouse=True)
def append_implementation(request: pytest.FixtureRequest) -> Iterator[str]:
    """The append path in use: ``"c"`` (the extension) or ``"python"``."""
    name: str = getattr(request, "param", APPEND_IMPLEMENTATIONS[0])
    with pytest.MonkeyPatch.context() as patch:
        if name == "python":
            patch.setattr(segmented, "_check_batch", None)
            patch.setattr(disk_segment, "_write_batch", None)
        yield name


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["memory", "disk", "disk-buffered"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_log(backend: str, tmp_path: Path, clock: FakeClock) -> Iterator[LogFactory]:
    """Open a log of the parametrized backend: ``make_log(**LogConfig fields)``."""
    opened: list[SegmentedLog] = []

    def factory(**settings: object) -> SegmentedLog:
        config = LogConfig(**settings)  # type: ignore[arg-type]
        log: SegmentedLog
        if backend == "memory":
            log = MemoryLog("t", 0, config, clock=clock)
        else:
            buffer = 1000 if backend == "disk-buffered" else 0
            log = DiskLog(
                str(tmp_path / f"t-{len(opened)}"),
                "t",
                0,
                config,
                clock=clock,
                write_buffer_bytes=buffer,
            )
        opened.append(log)
        return log

    yield factory
    for log in opened:
        log.close()
