#!/usr/bin/env bash
# Exit 0 when a Java 17 or newer is on PATH (Spark 4 needs it), else 1.
set -euo pipefail
command -v java >/dev/null 2>&1 || exit 1
version="$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n 1)"
[ -n "$version" ] && [ "$version" -ge 17 ]
