#!/usr/bin/env bash
# Sets up the project and runs the main job: the correlator on its embedded DuckDB with a demo
# incident (printed, then served on 127.0.0.1:8080). Extra arguments go to `correlator demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    cat <<'USAGE'
usage: bash scripts/demo.sh [correlator demo ARGS...]

Sets up .venv with the project, then runs `correlator demo`: builds a realistic incident into
./correlator-demo.duckdb (its evidence files in ./correlator-demo.duckdb.evidence/), prints
its timeline, findings and latency, and serves it on http://127.0.0.1:8080/ (Ctrl-C stops).
  --no-serve     print and exit            --port N     serve on another port
  --seed N       another story (7)         --db FILE    another database file
USAGE
    exit 0
fi
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
exec correlator demo "$@"
