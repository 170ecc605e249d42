#!/usr/bin/env bash
# Sets up the project and runs the demo: two real services on 127.0.0.1, one calling the
# other, every record carrying the same identifiers.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/setup.sh
source scripts/setup.sh
exec python examples/two_services.py "$@"
