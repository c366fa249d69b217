"""The committed message modules equal what the generator writes from ../shared today."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"


def test_generated_modules_are_fresh() -> None:
    assert (SHARED / "kafka-protocol" / "messages").is_dir(), (
        f"{SHARED} holds Kafka's message definitions; CI checks out shared/ beside the repo"
    )
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "generate_protocol.py"),
            "--check",
            "--shared",
            str(SHARED),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"run tools/generate_protocol.py:\n{result.stderr}"


def test_runtime_does_not_read_shared() -> None:
    """Nothing under kafkette/ refers to the shared folder or the JSON definitions."""
    for path in (ROOT / "kafkette").rglob("*.py"):
        text = path.read_text()
        assert "../shared" not in text and "kafka-protocol/" not in text, path
