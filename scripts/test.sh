#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian machine, then runs the whole suite:
# ruff (format + lint), mypy strict, pytest (unit, then integration) with branch coverage, and
# the replay of the incident corpus (correlator eval tests/incidents). The integration tests run
# against one real Grafana Loki (../shared/loki/start-loki), started here and stopped at the end.
# With CI=true (as .ci/run runs in CI) a real part that is missing or does not start (Loki,
# PostgreSQL, nginx, Chromium, Node.js) fails the run; elsewhere its tests skip, saying why.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    cat <<'USAGE'
usage: bash scripts/test.sh [PYTEST ARGS...]

Sets up .venv and the Debian packages the integration tests drive (as root), starts one real
Loki (../shared/loki/start-loki) and runs every check: ruff format --check, ruff check, mypy
(strict), pytest (unit, then integration) with branch coverage, and correlator eval
tests/incidents. Arguments go to both pytest runs, e.g.:

  bash scripts/test.sh -k owner          # only tests whose name has "owner"
  bash scripts/test.sh -x --lf           # stop at the first failure

Environment: CI=true makes a missing real part (Loki, PostgreSQL, nginx, Chromium, Node.js)
fail the run instead of skipping its tests; LOKI_URL uses a Loki of yours instead.
USAGE
    exit 0
fi

bash scripts/system-deps.sh

# One real Loki for the whole run, from ../shared beside the repository (CI lays a copy beside
# its clone, without run bits: start-loki copes). It takes 15-30 s to get ready, so it starts
# now in the background and the run waits for it only before the integration tests. A LOKI_URL
# already set (a Loki of your own) is used instead.
in_ci() { # as tests/real_parts.py reads CI
    local ci=${CI:-}
    case "${ci,,}" in true | 1 | yes) return 0 ;; *) return 1 ;; esac
}
loki_group="" loki_dir=""
stop_loki() {
    [ -n "$loki_group" ] || return 0
    # start-loki and the Loki it started share the process group setsid gave them.
    kill -TERM -- "-$loki_group" 2>/dev/null || true
    for _ in $(seq 1 50); do
        kill -0 -- "-$loki_group" 2>/dev/null || break
        sleep 0.2
    done
    kill -KILL -- "-$loki_group" 2>/dev/null || true
    rm -rf "$loki_dir"
}
trap stop_loki EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ -z "${LOKI_URL:-}" ]; then
    start_loki="$(dirname "$PWD")/shared/loki/start-loki"
    loki_dir=$(mktemp -d -t evidence-loki-XXXXXX)
    if [ -f "$start_loki" ]; then
        # shellcheck disable=SC2016 # expanded by the inner bash
        setsid bash -c 'began=$(date +%s%N); bash "$1" "" "$2/data" >"$2/env"; rc=$?
            echo $((($(date +%s%N) - began) / 1000000)) >"$2/ready-ms"; exit "$rc"' \
            start-loki "$start_loki" "$loki_dir" </dev/null 2>"$loki_dir/start.err" &
        loki_group=$!
    else
        echo "start-loki: $start_loki is missing" >"$loki_dir/start.err"
    fi
fi
wait_for_loki() {
    if [ -z "$loki_dir" ]; then
        echo "== real Loki: $LOKI_URL (LOKI_URL was given)"
        return 0
    fi
    if [ -n "$loki_group" ] && wait "$loki_group"; then
        eval "$(cat "$loki_dir/env")" # LOKI_URL=..., LOKI_PID=...
        export LOKI_URL
        local ms
        ms=$(cat "$loki_dir/ready-ms")
        echo "== real Loki: $LOKI_URL (pid $LOKI_PID), ready $((ms / 1000)).$((ms % 1000 / 100)) s after its start"
        return 0
    fi
    echo "== real Loki did not start:" >&2
    cat "$loki_dir/start.err" >&2
    command -v curl >/dev/null 2>&1 || echo "(start-loki needs curl: apt-get install curl)" >&2
    if in_ci; then
        echo "CI=true: the real-Loki tests must run, so the run fails here" >&2
        exit 1
    fi
    echo "its tests skip, saying why (CI=true would fail them)" >&2
}
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
# The LogQL parser the dashboard tests use (Grafana's own grammar), pinned by package-lock.json.
if command -v npm >/dev/null 2>&1 && [ ! -d dashboards/node_modules/@grafana/lezer-logql ]; then
    npm ci --prefix dashboards --no-audit --no-fund --loglevel=error >/dev/null
fi

echo "== ruff format --check"; ruff format --check .
echo "== ruff check";          ruff check .
echo "== mypy (strict)";       mypy
echo "== pytest: unit"
coverage erase
coverage run -m pytest -m "not integration" -q -p no:cacheprovider "$@"
echo "== correlator eval: the incident corpus and the held-out one (>= 95 % right, no owner named in a healthy case)"
correlator eval tests/incidents tests/incidents-holdout --fail-under 0.95
wait_for_loki
echo "== pytest: integration"
coverage run --append -m pytest -m integration -q -p no:cacheprovider "$@"
echo "== coverage"
coverage report
