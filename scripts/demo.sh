#!/usr/bin/env bash
# Install kafkette into .venv and run the end-to-end demo.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$here/scripts/setup.sh" "zstd"
cd "$here"
exec "$here/.venv/bin/python" -m kafkette.demo "$@"
