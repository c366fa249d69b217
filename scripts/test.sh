#!/usr/bin/env bash
# Install everything the test suite needs (Python packages; kcat and Java 17+ for Spark through
# apt when running as root) into .venv, then run the whole suite. Extra arguments go to pytest.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$here/scripts/setup.sh" "test,zstd,dev"
packages=()
command -v kcat >/dev/null 2>&1 || packages+=(kcat)
bash "$here/scripts/java_ok.sh" || packages+=(openjdk-17-jre-headless)
if [ ${#packages[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq </dev/null >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" </dev/null >/dev/null
    else
        echo "the tests need: apt-get install -y ${packages[*]}" >&2
        exit 1
    fi
fi
cd "$here"
# Test files spread over the machine's cores (one file's tests stay on one worker,
# with its session fixtures), handed out in collection order, where tests/conftest.py
# puts the minutes-long files first (xdist's default order, most tests first, left
# the Spark files to the end); "-n 0" runs everything in this process.
exec "$here/.venv/bin/python" -m pytest -n auto --maxprocesses 4 --dist loadfile \
    --no-loadscope-reorder --durations=25 "$@"
