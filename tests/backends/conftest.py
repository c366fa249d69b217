"""Fixtures running the behavioural suite against both backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkette.backends.config import LogConfig
from kafkette.backends.disk import DiskLog
from kafkette.backends.memory import MemoryLog
from kafkette.backends.segmented import SegmentedLog
from tests.backends.helpers import FakeClock

LogFactory = Callable[..., SegmentedLog]


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
