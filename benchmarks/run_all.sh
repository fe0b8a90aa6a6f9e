#!/usr/bin/env bash
# Every benchmark behind docs/benchmarks.md, medians of 3 runs each, on SQLite and PostgreSQL.
# Usage: benchmarks/run_all.sh [LOGFILE]   (about 25 minutes on 2 cores; run on a quiet machine)
set -euo pipefail
cd "$(dirname "$0")/.."
log="${1:-/tmp/duetime-bench.log}"
: > "$log"
run() { echo "\$ $*" | tee -a "$log"; "$@" 2>&1 | tee -a "$log"; echo | tee -a "$log"; }
for store in sqlite postgres; do
  run .venv/bin/duetime bench run burst-http --store "$store" --tasks 20000 --repeat 3
  run .venv/bin/python benchmarks/worker_burst.py --store "$store" --tasks 20000 --repeat 3
  # The same burst with duetime.Worker at its default settings (SPEC §6, issue 15).
  run .venv/bin/python benchmarks/worker_burst.py --store "$store" --tasks 20000 --repeat 3 \
    --concurrency 0
  run .venv/bin/duetime bench run immediate-http --store "$store" --tasks 500 --repeat 3
  run .venv/bin/duetime bench run immediate-worker --store "$store" --tasks 500 --repeat 3
  run .venv/bin/duetime bench run create-latency --store "$store" --repeat 3
  run .venv/bin/duetime bench run create-throughput --store "$store" --tasks 20000 --repeat 3
  run .venv/bin/duetime bench run create-sdk-single --store "$store" --repeat 3
  run .venv/bin/duetime bench run create-sdk-batch --store "$store" --tasks 20000 --repeat 3
  run .venv/bin/duetime bench run steady-http --store "$store" --tasks 20000 --repeat 3
done
echo "log: $log"
