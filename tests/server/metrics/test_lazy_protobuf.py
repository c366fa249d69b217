"""Starting a broker loads no protobuf: OTLP's generated classes are imported by the first
PushTelemetry, so memory:// clusters and ``kafkette serve`` do not pay for them (~80 ms)."""

from __future__ import annotations

import subprocess
import sys


def test_the_broker_and_memory_clusters_import_no_protobuf() -> None:
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, kafkette.server.broker, kafkette.testing, kafkette.cli.serve\n"
            "print(sorted(m for m in sys.modules"
            " if m.split('.')[0] in ('google', 'opentelemetry')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded == "[]"
