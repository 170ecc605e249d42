#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian machine, then runs the whole suite:
# ruff (format + lint), mypy strict, pytest (unit, then integration) with branch coverage.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/system-deps.sh
# shellcheck source=scripts/setup.sh
source scripts/setup.sh

echo "== ruff format --check"; ruff format --check .
echo "== ruff check";          ruff check .
echo "== mypy (strict)";       mypy
echo "== pytest: unit"
coverage erase
coverage run -m pytest -m "not integration" -q -p no:cacheprovider "$@"
echo "== pytest: integration"
coverage run --append -m pytest -m integration -q -p no:cacheprovider "$@"
echo "== coverage"
coverage report
