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
# The install also compiles the native record mapping (correlator/sources/native/*.c)
# with the machine's C compiler and Python's headers: as root, they are installed when missing
# (python.org and pyenv builds carry their headers; Debian's python3 needs python3-dev). A
# change to the C source installs again.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    missing=()
    command -v cc >/dev/null 2>&1 || missing+=(gcc)
    python -c "import os, sysconfig; os.stat(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))" \
        2>/dev/null || missing+=(python3-dev)
    if [ ${#missing[@]} -gt 0 ]; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    fi
fi
if ! python -c "import agent_logging, structlog, orjson, pytest, fastapi" 2>/dev/null \
        || ! python -c "import correlator.sources._record_native" 2>/dev/null \
        || [ pyproject.toml -nt .venv/.installed ] \
        || [ -n "$(find correlator/sources/native -newer .venv/.installed -print -quit)" ]; then
    python -m pip install --quiet --upgrade pip
    python -m pip install --quiet -e '.[dev]'
    touch .venv/.installed
fi
