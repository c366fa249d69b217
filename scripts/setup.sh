#!/usr/bin/env bash
# Create .venv (if needed) and install kafkette with the extras given as arguments.
# Usage: source scripts/setup.sh test,zstd
set -euo pipefail
extras="${1:-}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3
if [ ! -x "$here/.venv/bin/python" ]; then
    "$python" -m venv "$here/.venv"
fi
"$here/.venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
if [ -n "$extras" ]; then
    "$here/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$here[$extras]"
else
    "$here/.venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$here"
fi
