"""Running ``kafkette`` as a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping

TIMEOUT_S = 60


def kafkette(
    *args: str,
    input: bytes | str = b"",
    env: Mapping[str, str] | None = None,
    bootstrap: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m kafkette ARGS`` (then ``-b bootstrap`` when given), stdin from
    ``input``; the output as text. ``$KAFKETTE_BOOTSTRAP_SERVERS`` is unset unless in ``env``."""
    command = [sys.executable, "-m", "kafkette", *args]
    if bootstrap is not None:
        command += ["-b", bootstrap]
    environment = {k: v for k, v in os.environ.items() if k != "KAFKETTE_BOOTSTRAP_SERVERS"}
    environment.update(env or {})
    data = input.encode() if isinstance(input, str) else input
    result = subprocess.run(
        command, input=data, capture_output=True, timeout=TIMEOUT_S, env=environment
    )
    return subprocess.CompletedProcess(
        result.args,
        result.returncode,
        result.stdout.decode("utf-8", "backslashreplace"),
        result.stderr.decode("utf-8", "backslashreplace"),
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """The stdout of a command that must have succeeded silently on stderr."""
    assert (result.returncode, result.stderr) == (0, ""), result
    return result.stdout
