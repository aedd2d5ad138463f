#!/usr/bin/env bash
# `orrery convert` on the largest PyTorch inputs at hand: the ResNet host trace (13 MB of JSON)
# with the ResNet Kineto trace (26 MB; another run, so --allow-pid-mismatch), the linear
# host/Kineto pair (21 MB of Kineto JSON) and the 8-rank DLRM directory, from ../shared/data when it
# is present, else the bundled linear pair alone. Prints the median of three runs: wall time, CPU
# time (user + system) and peak RSS. Usage: bench/convert.sh [build-dir]
set -euo pipefail
build=${1:-build}
orrery="$build/orrery"
shared=../shared/data/facebookresearch+param/et_replay/tests/inputs
bundled=tests/data/pytorch
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# measure LABEL ARGS...: runs `orrery convert -q ARGS` three times, prints the medians.
measure() {
  local label=$1
  shift
  for run in 1 2 3; do
    /usr/bin/time -f "%e %U %S %M" -o "$out/time.$run" "$orrery" convert -q "$@"
  done
  local wall cpu rss
  wall=$(cat "$out"/time.* | awk '{print $1}' | sort -n | sed -n 2p)
  cpu=$(cat "$out"/time.* | awk '{printf "%.2f\n", $2 + $3}' | sort -n | sed -n 2p)
  rss=$(cat "$out"/time.* | awk '{print $4}' | sort -n | sed -n 2p)
  printf "%-52s %6s s wall %6s s CPU %7d KiB peak RSS\n" "$label" "$wall" "$cpu" "$rss"
}

if [[ -d "$shared" ]]; then
  measure "resnet_et + resnet_kineto (14,392 nodes, 111k events)" \
    --host "$shared/resnet_et.json.gz" --device "$shared/resnet_kineto.json.gz" \
    --allow-pid-mismatch -o "$out/resnet.et"
  measure "resnet_et alone (14,392 nodes)" --host "$shared/resnet_et.json.gz" -o "$out/resnet.et"
  measure "linear_et + linear_kineto (931 nodes, 87k events)" \
    --host "$shared/linear_et.json.gz" --device "$shared/linear_kineto.json.gz" -o "$out/linear.et"
  mkdir -p "$out/dlrm"
  tar -xzf "$shared/dlrm_pytorch_et.tar.gz" -C "$out/dlrm"
  tar -xzf "$shared/dlrm_kineto.tar.gz" -C "$out/dlrm"
  measure "DLRM directory, 8 ranks with Kineto" --dir "$out/dlrm" -o "$out/dlrm-out/dlrm"
else
  measure "linear_et + linear_kineto (931 nodes, 87k events)" \
    --host "$bundled/linear_et.json.gz" --device "$bundled/linear_kineto.json.gz" \
    -o "$out/linear.et"
fi
