"""One request must never take the broker down: a mutation fuzz over every API.

Seed frames of every API the broker serves (each at its lowest and highest
version) are mutated (:mod:`tests.server.fuzz_frames`) and each sent on a fresh
connection to a broker served over loopback TCP in process; after each, a
fresh connection must get an ApiVersions answer within 3 s. The seed is fixed
and the count bounded (20,000 frames in memory, 500 on disk, where fsyncs
make each slower) so that CI runs it in about a minute; ``KAFKETTE_FUZZ_FRAMES`` (and
``KAFKETTE_FUZZ_DISK_FRAMES``, ``KAFKETTE_FUZZ_SEED``) run it longer or
differently.

A failing frame is written to ``fuzz_regressions/`` (hex, with what it was),
and every file there is replayed by :func:`test_regression_frames`.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from tests.server.fuzz_frames import Seed, cases, seeds
from tests.server.fuzz_harness import FuzzBroker, fuzz_broker

FRAMES = int(os.environ.get("KAFKETTE_FUZZ_FRAMES", "20000"))
DISK_FRAMES = int(os.environ.get("KAFKETTE_FUZZ_DISK_FRAMES", str(max(FRAMES // 40, 1))))
SEED = int(os.environ.get("KAFKETTE_FUZZ_SEED", "22"))
REGRESSIONS = Path(__file__).parent / "fuzz_regressions"


def save_regression(target: Seed, kind: str, index: int, frame: bytes, why: str) -> Path:
    """Write a failing frame where :func:`test_regression_frames` replays it."""
    REGRESSIONS.mkdir(exist_ok=True)
    path = REGRESSIONS / f"{target.name}-{kind}-{SEED}-{index}.hex"
    path.write_text(f"# {why}\n{frame.hex()}\n")
    return path


def run_fuzz(fuzz: FuzzBroker, count: int, seed: int) -> int:
    """Send ``count`` mutated frames, each followed by a health check; the frames sent."""
    rng = random.Random(seed)
    pool = seeds()
    sent = 0
    for index, (target, kind, frame) in enumerate(cases(rng, pool, count)):
        fuzz.send(frame)
        sent += 1
        problem = fuzz.healthy()
        if problem is None and fuzz.internal_errors:
            problem = f"internal error: {fuzz.internal_errors[0]}"
        if problem is not None:
            path = save_regression(target, kind, index, frame, problem)
            pytest.fail(
                f"case {index} ({target.name}, {kind}, {len(frame)} bytes, saved as "
                f"{path.name}): {problem}"
            )
        fuzz.reset()
    return sent


@pytest.mark.timeout(max(300, FRAMES // 100))  # a longer run gets a longer budget
def test_mutated_frames_never_take_the_memory_broker_down() -> None:
    started = time.monotonic()
    with fuzz_broker() as fuzz:
        sent = run_fuzz(fuzz, FRAMES, SEED)
    assert sent == FRAMES
    print(f"{sent} mutated frames in {time.monotonic() - started:.1f}s")


@pytest.mark.timeout(max(300, DISK_FRAMES // 10))
def test_mutated_frames_never_take_the_disk_broker_down(tmp_path: Path) -> None:
    with fuzz_broker(str(tmp_path)) as fuzz:
        sent = run_fuzz(fuzz, DISK_FRAMES, SEED + 1)
    assert sent == DISK_FRAMES


def regression_files() -> list[Path]:
    return sorted(REGRESSIONS.glob("*.hex"))


@pytest.mark.parametrize("path", regression_files(), ids=lambda p: p.stem)
def test_regression_frames(path: Path) -> None:
    """Each saved frame, on a fresh connection to a fresh broker, then a health check."""
    lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
    frame = bytes.fromhex("".join(lines))
    with fuzz_broker() as fuzz:
        fuzz.send(frame)
        assert fuzz.healthy() is None
        assert fuzz.internal_errors == []
