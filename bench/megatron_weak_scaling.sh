#!/usr/bin/env bash
# Megatron-LM's weak-scaling table (Narayanan et al., SC'21, Table 1: GPT, 1.7B to 1T parameters
# on up to 3,072 A100s) end to end: `orrery gen llm` with each row's plan, `orrery run --hardware
# dgx-a100 --nodes N --nic hdr200x8`, and TFLOP/s per GPU by the paper's formula
#   F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h))  (full recomputation), TFLOP/s = F / (T x GPUs).
# Plan of every row: full recomputation, tp and pp from the table, dp = GPUs / (tp pp), the
# table's global batch, micro-batch 1, seq 2048, vocab 51200, 1F1B schedule, attention unfused
# (Megatron-LM 2021), each micro-batch's gradients accumulated by a separate kernel (6 B per
# parameter: fp16 main_grad.add_(grad)), one gradient bucket per layer (reduced after the last
# micro-batch).
# EXTRAPOLATE=1 simulates fewer micro-batches per pipeline and extrapolates linearly (below;
# the output says so per row). Times are wall / CPU (user + sys) seconds of gen + run. Usage:
#   bench/megatron_weak_scaling.sh [build-dir] [rows, e.g. "1 2 3"]
set -euo pipefail
BUILD=${1:-build}
ROWS=${2:-"1 2 3 4 5 6 7 8 9 10"}
ORRERY=$(realpath "$BUILD/orrery")
TABLE=${TABLE:-$(dirname "$0")/../../shared/data/hardware/e2e_megatron_ptdp_table1_a100.tsv}
[ -f "$TABLE" ] || TABLE=/work/shared/data/hardware/e2e_megatron_ptdp_table1_a100.tsv
WORK=$(mktemp -d /tmp/orrery_megatron.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
SEQ=2048
VOCAB=51200
# A file per pipeline stage and a rank map (gen --classes, docs/formats/rank-map.md); RANK_FILES=1
# writes a file per rank instead (row 10: 14 GB), with the same results.
CLASSES=--classes
[ -n "${RANK_FILES:-}" ] && CLASSES=

printf "%-4s %-8s %-28s %14s %10s %9s %8s %s\n" row params "plan (tp pp dp, B, mb)" "sim time s" \
  "TFLOP/s" measured error "wall/cpu s"
row=0
grep -v '^#' "$TABLE" | tail -n +2 | while IFS=$'\t' read -r params heads hidden layers tp pp gpus batch tflops pct agg; do
  row=$((row + 1))
  case " $ROWS " in *" $row "*) ;; *) continue ;; esac
  dp=$((gpus / (tp * pp)))
  nodes=$((gpus / 8))
  micro=$((batch / dp))
  dir="$WORK/r$row"
  mkdir -p "$dir"
  cat > "$dir/model.json" <<JSON
{"base": "gpt3-175b", "name": "megatron-${params}b", "layers": $layers, "hidden": $hidden,
 "heads": $heads, "kv_heads": $heads, "ffn": $((4 * hidden)), "vocab": $VOCAB, "seq": $SEQ,
 "unfused_attention": true, "grad_accumulation_bytes": 6}
JSON
  # Simulated seconds of one iteration of $1 sequences (all replicas).
  simulate() {
    local b=$1
    /usr/bin/time -a -f "%U %S" -o "$dir/time" "$ORRERY" gen llm --model "$dir/model.json" --global-batch "$b" --micro-batch 1 \
      --dp "$dp" --tp "$tp" --pp "$pp" --recompute --bucket-size 1024TiB $CLASSES -o "$dir/t" \
      > "$dir/gen.log" 2>&1 || { echo "row $row: gen llm failed: $(tail -3 "$dir/gen.log")" >&2; return 1; }
    /usr/bin/time -a -f "%U %S" -o "$dir/time" "$ORRERY" run --hardware dgx-a100 --nodes "$nodes" \
      --nic hdr200x8 -w "$dir/t" --comm-group-configuration "$dir/t.json" --output "$dir/out.json" \
      > "$dir/run.log" 2>&1 || { echo "row $row: run failed: $(tail -3 "$dir/run.log")" >&2; return 1; }
    rm -f "$dir"/t.*.et "$dir"/t.ranks.json
    /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['summary']['simulated_ns'] * 1e-9, d['simulation']['mode'])" "$dir/out.json"
  }
  start=$(date +%s.%N)
  : > "$dir/time"
  # EXTRAPOLATE=1: micro-batches per pipeline m2 = max(2 pp, 32) (at most the row's M) and
  # m1 = m2 / 2; a 1F1B iteration is linear in m once m >= pp (each extra micro-batch adds one
  # forward and one backward per stage), so T(M) = T(m2) + (M - m2) (T(m2) - T(m1)) / (m2 - m1).
  m2=$micro; note=""
  if [ -n "${EXTRAPOLATE:-}" ]; then
    m2=$(( 2 * pp > 32 ? 2 * pp : 32 )); [ "$m2" -gt "$micro" ] && m2=$micro
  fi
  read -r t2 mode < <(simulate $((m2 * dp))) || continue
  t=$t2
  if [ "$m2" -lt "$micro" ]; then
    m1=$((m2 / 2))
    read -r t1 mode1 < <(simulate $((m1 * dp))) || continue
    t=$(/usr/bin/python3 -c "print($t2 + ($micro - $m2) * ($t2 - $t1) / ($m2 - $m1))")
    note=" extrapolated from $m1 and $m2 of $micro micro-batches"
  fi
  wall=$(echo "$(date +%s.%N) - $start" | bc)
  cpu=$(awk '{s += $1 + $2} END {print s}' "$dir/time")
  /usr/bin/python3 - "$t" "$params" "$tp" "$pp" "$dp" "$batch" "$layers" "$hidden" "$tflops" \
    "$gpus" "$row" "$wall" "$cpu" "$mode" "$note" <<'PY'
import sys
t, params, tp, pp, dp, batch, layers, hidden, measured, gpus, row, wall, cpu, mode, note = sys.argv[1:]
t = float(t)
tp, pp, dp, batch, layers, hidden, gpus = map(int, (tp, pp, dp, batch, layers, hidden, gpus))
s, V = 2048, 51200
F = 96 * batch * s * layers * hidden**2 * (1 + s / (6 * hidden) + V / (16 * layers * hidden))
achieved = F / t / gpus / 1e12
err = (achieved - float(measured)) / float(measured) * 100
plan = f"{tp} {pp} {dp}, B {batch}, mb 1"
print(f"{row:<4} {params:<8} {plan:<28} {t:14.3f} {achieved:10.1f} {float(measured):9.0f} {err:+7.1f}% {float(wall):.0f}/{float(cpu):.0f} {mode}{note}", flush=True)
PY
  rm -rf "$dir"
done
