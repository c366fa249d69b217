"""The README's main job (``python -m kafkette.demo``) runs and checks itself."""

from __future__ import annotations

import subprocess
import sys


def test_demo_round_trips_through_the_broker_and_the_fake() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kafkette.demo"], capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("kafkette serve is listening on 127.0.0.1:")
    assert lines.count("  every key, value, header and offset matches what was sent") == 2
    assert any("kafkette serve: SIGTERM received, shutting down" in line for line in lines)
    assert lines[-1] == "all good"
