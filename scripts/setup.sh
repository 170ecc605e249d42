#!/usr/bin/env bash
# Creates .venv (if missing) and installs the project with every extra; idempotent.
# Sourced by scripts/test.sh and scripts/demo.sh; leaves the virtualenv activated. (The tests'
# LogQL grammar from npm is installed by scripts/test.sh: the demo does not need it.)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# shellcheck source=/dev/null
source .venv/bin/activate
if ! python -c "import agent_logging, structlog, orjson, pytest, fastapi" 2>/dev/null \
        || [ pyproject.toml -nt .venv/.installed ]; then
    python -m pip install --quiet --upgrade pip
    python -m pip install --quiet -e '.[dev]'
    touch .venv/.installed
fi
