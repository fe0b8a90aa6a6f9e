#!/usr/bin/env bash
# SPEC §6 "the same worker burst with duetime.Worker at its defaults ≥ 1.5 x
# PgQueuer": PgQueuer's burst and duetime's, run in turn (one of each per round, --rounds N
# rounds), so that both sides meet the same moment of this machine's drifting speed. Prints
# every run, each round's ratio, and the medians.
#   bash benchmarks/peers/side_by_side.sh [--rounds 5] [--tasks 20000]
# Every run takes /tmp/bench.lock itself; do not wrap this script in flock. For another
# revision, run its copy from a worktree holding a .venv link, with PYTHONPATH=<worktree>/src.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
rounds=5
tasks=20000
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --tasks) tasks="$2"; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--tasks N]" >&2; exit 2 ;;
  esac
done
python="$root/.venv/bin/python"
if [ ! -x "$python" ]; then
  echo "no $python: run scripts/bootstrap dev in $root first" >&2
  exit 1
fi
peers=()
ours=()
for i in $(seq 1 "$rounds"); do
  # Each run's whole output is kept, so a failed run is shown rather than ending the script
  # silently (set -e and pipefail would stop at the substitution).
  peer_out=$(bash "$here/run_pgqueuer.sh" --only burst --repeat 1 --jobs "$tasks" 2>&1) || true
  our_out=$(cd "$root" && flock /tmp/bench.lock "$python" benchmarks/worker_burst.py \
      --store postgres --tasks "$tasks" --repeat 1 --concurrency 0 2>&1) || true
  p=$(sed -n 's/.*burst run 1: jobs\/s \([0-9,.]*\).*/\1/p' <<<"$peer_out" | tr -d ,)
  d=$(sed -n 's/^run 1: throughput_per_s=\([0-9.]*\),.*/\1/p' <<<"$our_out")
  if [ -z "$p" ] || [ -z "$d" ]; then
    echo "round $i: a run failed (PgQueuer '$p', duetime '$d'); the last lines of each:" >&2
    tail -n 5 <<<"$peer_out" >&2
    tail -n 5 <<<"$our_out" >&2
    exit 1
  fi
  peers+=("$p")
  ours+=("$d")
  "$python" -c "import sys; p, d = map(float, sys.argv[1:]); print(f'round $i: PgQueuer {p:,.0f}/s, duetime {d:,.0f}/s, ratio {d / p:.2f}')" "$p" "$d"
done
"$python" - "${peers[*]}" "${ours[*]}" <<'PY'
import statistics, sys
peers, ours = ([float(x) for x in arg.split()] for arg in sys.argv[1:])
ratios = [d / p for p, d in zip(peers, ours)]
print(f"median: PgQueuer {statistics.median(peers):,.0f}/s, duetime {statistics.median(ours):,.0f}/s, "
      f"ratio of medians {statistics.median(ours) / statistics.median(peers):.2f}, "
      f"median of round ratios {statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})")
PY
