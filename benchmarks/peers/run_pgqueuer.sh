#!/usr/bin/env bash
# PgQueuer side by side (benchmarks/peers/pgqueuer_bench.py) in a throwaway venv outside the
# repository, created once and reused: PgQueuer never goes into the project's .venv.
#   bash benchmarks/peers/run_pgqueuer.sh --repeat 3
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${DUETIME_PEERS_VENV:-/tmp/duetime-peers-venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3.11 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements-pgqueuer.txt"
exec "$venv/bin/python" "$here/pgqueuer_bench.py" "$@"
