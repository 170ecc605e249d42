#!/usr/bin/env bash
# Installs the Debian packages the integration tests drive for real: PostgreSQL and nginx (the
# devstack's database and ingress), Chromium (the page test), Node.js (the LogQL grammar).
# Idempotent: skips what is already installed.
set -euo pipefail
missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)   # Grafana's LogQL grammar
[ -x /usr/bin/chromium ] || missing+=(chromium)             # the timeline page test
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
# The Debian packages start services of their own (a cluster on 5432, nginx on port 80); the
# tests start throwaway ones on free ports instead.
if command -v pg_ctlcluster >/dev/null 2>&1; then
    for version in /usr/lib/postgresql/*; do
        pg_ctlcluster "$(basename "$version")" main stop >/dev/null 2>&1 || true
    done
fi
if [ -f /run/nginx.pid ]; then
    if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet nginx 2>/dev/null; then
        systemctl stop nginx || true
    else
        nginx -s quit >/dev/null 2>&1 || true
    fi
fi
