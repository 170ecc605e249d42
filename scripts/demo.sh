#!/usr/bin/env bash
# Sets up the project and runs the main job: the correlator on its embedded DuckDB with a demo
# incident (printed, then served on 127.0.0.1:8080). Extra arguments go to `correlator demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
exec correlator demo "$@"
