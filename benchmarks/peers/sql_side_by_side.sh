#!/usr/bin/env bash
# The SQL API's bars: single creates through duetime.create_task_v1 (one awaiting caller, one
# transaction each) >= 1.0 x PgQueuer's single enqueue, and 1,000-task batches through
# duetime.create_tasks_v1 >= 1.0 x PgQueuer's bulk enqueue. PgQueuer's runs
# (run_pgqueuer.sh --only single,bulk) and duetime's (benchmarks/sql_api_create.py) in turn, one
# of each per round, so both meet the same moment of this machine; prints each round's ratios and
# the medians.
#   bash benchmarks/peers/sql_side_by_side.sh [--rounds 5]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
rounds=5
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "usage: $0 [--rounds N]" >&2; exit 2 ;;
  esac
done
python="$root/.venv/bin/python"
if [ ! -x "$python" ]; then
  echo "no $python: run scripts/bootstrap dev in $root first" >&2
  exit 1
fi
figures=()
for i in $(seq 1 "$rounds"); do
  peer_out=$(bash "$here/run_pgqueuer.sh" --only single,bulk --repeat 1 2>&1) || true
  our_out=$(cd "$root" && "$python" benchmarks/sql_api_create.py --repeat 1 2>&1) || true
  row=()
  for figure in single bulk; do
    p=$(sed -n "s/.*$figure run 1: jobs\/s \([0-9,.]*\).*/\1/p" <<<"$peer_out" | tr -d ,)
    d=$(sed -n "s/.*$figure run 1: jobs\/s \([0-9,.]*\).*/\1/p" <<<"$our_out" | tr -d ,)
    if [ -z "$p" ] || [ -z "$d" ]; then
      echo "round $i: a $figure run failed (PgQueuer '$p', duetime '$d'); the last lines:" >&2
      tail -n 5 <<<"$peer_out" >&2
      tail -n 5 <<<"$our_out" >&2
      exit 1
    fi
    row+=("$figure:$p:$d")
  done
  figures+=("${row[*]}")
  "$python" -c "
import sys
for item in sys.argv[1:]:
    f, p, d = item.split(':'); p, d = float(p), float(d)
    print(f'round $i {f}: PgQueuer {p:,.0f}/s, duetime SQL API {d:,.0f}/s, ratio {d / p:.2f}')
" "${row[@]}"
done
"$python" - "${figures[@]}" <<'PY'
import statistics, sys
rounds = [dict((f, (float(p), float(d))) for f, p, d in (x.split(":") for x in r.split())) for r in sys.argv[1:]]
for figure in ("single", "bulk"):
    peers = [r[figure][0] for r in rounds]
    ours = [r[figure][1] for r in rounds]
    ratios = [d / p for p, d in zip(peers, ours)]
    print(f"{figure} median: PgQueuer {statistics.median(peers):,.0f}/s, duetime SQL API "
          f"{statistics.median(ours):,.0f}/s, median of round ratios {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
PY
