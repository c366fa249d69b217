#!/usr/bin/env bash
# Install everything the test suite needs (Python packages, and kcat when running as root)
# into .venv, then run the whole suite. Extra arguments go to pytest.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$here/scripts/setup.sh" "test,zstd,dev"
if ! command -v kcat >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq </dev/null >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat </dev/null >/dev/null
    else
        echo "kcat is required by the conformance tests: apt-get install -y kcat" >&2
        exit 1
    fi
fi
cd "$here"
exec "$here/.venv/bin/python" -m pytest "$@"
