"""Every record test runs with the C parser (when built) and with the pure-Python one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafkette.protocol.records import speedups

IMPLEMENTATIONS = ["c", "python"] if speedups.EXTENSION_USED else ["python"]

# Tests of the pure-Python parser's own fast paths (they spy on record_runs).
PYTHON_ONLY = {
    "test_columnar_path_is_taken",
    "test_varied_run_path_is_taken",
    "test_runs_with_headers_are_taken",
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.module.__name__.endswith("test_speedups"):
        return  # compares the two parsers itself
    if "parser_implementation" in metafunc.fixturenames:
        names = ["python"] if metafunc.function.__name__ in PYTHON_ONLY else IMPLEMENTATIONS
        metafunc.parametrize("parser_implementation", names, indirect=True)


@pytest.fixture(autouse=True)
def parser_implementation(request: pytest.FixtureRequest) -> Iterator[str]:
    """The record parser in use: ``"c"`` (the extension) or ``"python"``."""
    name: str = getattr(request, "param", "c")
    with pytest.MonkeyPatch.context() as patch:
        if name == "python":
            patch.setattr(speedups, "parse_records", None)
        yield name
