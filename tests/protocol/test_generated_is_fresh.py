"""The committed message modules equal what the generator writes from tools/kafka-protocol."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFINITIONS = ROOT / "tools" / "kafka-protocol"


def test_generated_modules_are_fresh() -> None:
    """tools/generate_protocol.py --check finds every committed module up to date."""
    assert (DEFINITIONS / "messages" / "ProduceRequest.json").is_file()
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "generate_protocol.py"),
            "--check",
            "--definitions",
            str(DEFINITIONS),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"run tools/generate_protocol.py:\n{result.stderr}"


def test_definitions_name_their_kafka_commit() -> None:
    """SOURCE_COMMIT names the Apache Kafka commit the definitions come from."""
    commit = (DEFINITIONS / "SOURCE_COMMIT").read_text().strip()
    assert len(commit) == 40 and int(commit, 16) >= 0


def test_runtime_does_not_read_the_definitions() -> None:
    """Nothing under kafkette/ refers to the JSON definitions."""
    for path in (ROOT / "kafkette").rglob("*.py"):
        text = path.read_text()
        assert "kafka-protocol/" not in text, path


def test_nothing_refers_to_the_shared_folder() -> None:
    """The repository is self-contained: no file points outside it to the shared folder."""
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    outside = "../" + "shared"  # spelled so that this file does not match itself
    offenders = [
        name
        for name in tracked
        if not name.endswith(".json")
        and (ROOT / name).is_file()
        and outside in (ROOT / name).read_text(errors="replace")
    ]
    assert offenders == []
