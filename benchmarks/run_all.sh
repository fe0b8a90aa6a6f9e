#!/usr/bin/env bash
# Every benchmark behind docs/benchmarks.md, medians of 3 runs each, on SQLite and PostgreSQL.
# Usage: benchmarks/run_all.sh [LOGFILE]   (about 40 minutes on 2 cores; run on a quiet machine)
set -euo pipefail
cd "$(dirname "$0")/.."
log="${1:-/tmp/duetime-bench.log}"
: > "$log"
run() { echo "\$ $*" | tee -a "$log"; "$@" 2>&1 | tee -a "$log"; echo | tee -a "$log"; }
for store in sqlite postgres; do
  run .venv/bin/duetime bench run burst-http --store "$store" --tasks 20000 --repeat 3
  run .venv/bin/python benchmarks/worker_burst.py --store "$store" --tasks 20000 --repeat 3
  # The same burst with duetime.Worker at its default settings (SPEC §6).
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
# Keyed rate limits at SPEC §6's scale (PostgreSQL only): ~4 minutes a round.
run .venv/bin/python benchmarks/flow_keys.py --keys 10000 --rate 1 --hot-rate 10 --seconds 60 \
  --repeat 3
echo "log: $log"
