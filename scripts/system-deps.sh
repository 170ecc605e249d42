#!/usr/bin/env bash
# Installs the Debian packages the integration tests drive for real: PostgreSQL, nginx,
# Chromium (the page test), Node.js (Grafana's LogQL grammar). Idempotent: skips what is
# already installed.
set -euo pipefail
missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
[ -x /usr/bin/chromium ] || missing+=(chromium)
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "system-deps: missing ${missing[*]}; install them (sudo apt-get install ${missing[*]}) or run as root" >&2
    exit 0  # the tests that need them skip with a reason
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The Debian package starts a cluster of its own; the tests start throwaway ones instead.
if command -v pg_ctlcluster >/dev/null 2>&1; then
    for version in /usr/lib/postgresql/*; do
        pg_ctlcluster "$(basename "$version")" main stop >/dev/null 2>&1 || true
    done
fi
