#!/usr/bin/env bash
# Creates .venv (if missing) and installs the project with every extra; idempotent.
# Sourced by scripts/test.sh and scripts/demo.sh; leaves the virtualenv activated.
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
# The LogQL parser the dashboard tests use (Grafana's own grammar), pinned by package-lock.json.
if command -v npm >/dev/null 2>&1 && [ ! -d dashboards/node_modules/@grafana/lezer-logql ]; then
    npm ci --prefix dashboards --no-audit --no-fund --loglevel=error >/dev/null
fi
