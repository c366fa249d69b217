#!/usr/bin/env bash
# Install kafkette into .venv (with the spark extra; Java 17 through apt when it is missing and
# we run as root), then run the end-to-end demo and the Spark pipeline demo.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$here/scripts/setup.sh" "zstd,spark"
if ! bash "$here/scripts/java_ok.sh"; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq </dev/null >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless </dev/null >/dev/null
    else
        echo "the Spark demo needs Java 17 or newer: apt-get install -y openjdk-17-jre-headless" >&2
        exit 1
    fi
fi
cd "$here"
"$here/.venv/bin/python" -m kafkette.demo "$@"
exec "$here/.venv/bin/python" -m kafkette.spark_integration.demo
