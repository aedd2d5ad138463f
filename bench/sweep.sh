#!/usr/bin/env bash
# orrery sweep's figures: points per second on one machine (wall and CPU time), the same sweep
# under `mpirun -np 2` giving the same rows, and `kill -9` in the middle of a run followed by the
# same command giving every point exactly once. Usage: bench/sweep.sh [BUILD_DIR] [SWEEP_FILE]
# (default: bench/sweep_medium.yml; examples/sweep/gpt3_175b_1024.yml for the GPT-3 study).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../build}"
sweep="${2:-$here/sweep_medium.yml}"
orrery="$build/orrery"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

"$orrery" sweep "$sweep" --count
echo "== one process, 2 threads"
/usr/bin/time -f "wall %e s, user %U s, sys %S s" \
  "$orrery" sweep "$sweep" --db "$out/one.sqlite" --csv "$out/one.csv" --threads 2 --progress off --top 3

echo "== mpirun -np 2 (1 thread per rank)"
/usr/bin/time -f "wall %e s, user %U s, sys %S s (rank 0's process tree)" \
  mpirun --allow-run-as-root --oversubscribe -np 2 \
  "$orrery" sweep "$sweep" --db "$out/mpi.sqlite" --csv "$out/mpi.csv" --threads 1 --progress off --top 3
if cmp -s "$out/one.csv" "$out/mpi.csv"; then
  echo "MPI rows identical to the one-process rows: $(($(wc -l <"$out/one.csv") - 1)) rows"
else
  echo "MPI rows DIFFER"; diff "$out/one.csv" "$out/mpi.csv" | head; exit 1
fi

echo "== kill -9 in the middle, then the same command"
"$orrery" sweep "$sweep" --db "$out/kill.sqlite" --threads 2 --progress off >/dev/null &
pid=$!
total=$(sqlite3 "$out/one.sqlite" "select count(*) from points")
while :; do
  sleep 0.5
  n=$(sqlite3 "$out/kill.sqlite" "select count(*) from points" 2>/dev/null || echo 0)
  if [ "$n" -ge $((total / 3)) ]; then break; fi
done
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
echo "killed with $(sqlite3 "$out/kill.sqlite" "select count(*) from points") of $total rows"
"$orrery" sweep "$sweep" --db "$out/kill.sqlite" --csv "$out/kill.csv" --threads 2 --progress off | head -1
sqlite3 "$out/kill.sqlite" "select count(*), count(distinct id), min(id), max(id) from points" |
  awk -F'|' -v t="$total" '{print "after resume: " $1 " rows, " $2 " distinct ids, ids " $3 ".." $4 " of " t}'
if cmp -s "$out/one.csv" "$out/kill.csv"; then echo "resumed rows identical to the uninterrupted run"; else echo "resumed rows DIFFER"; exit 1; fi

echo "== rejections"
sqlite3 "$out/one.sqlite" "select reason from points where status = 'rejected' group by substr(reason, 1, 20) limit 5"
