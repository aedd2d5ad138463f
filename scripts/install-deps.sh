#!/usr/bin/env bash
# Installs the Debian 12 packages orrery needs to build, test and benchmark (NLopt and GLPK: the
# optimizer of `orrery libra`; chromium: the browser test of `orrery report` opens the HTML page
# headless; libtorch: replay, synth and partition, with OpenBLAS (libtorch on the reference BLAS
# multiplies matrices about 20x slower); pybind11 and python3-dev: the `orrery` Python
# module, built for Debian's /usr/bin/python3, whose numpy, pytest, matplotlib, torch and sklearn
# packages the Python tests, examples and recording scripts use; Open MPI: distributed sweeps and
# replays; Gloo, the collectives library libtorch's CPU backend uses: replays without an MPI
# launcher; SQLite: sweep results; CBC and GLPK: exact sharding plans; Eigen: least squares;
# libonnx-dev: ONNX models for `orrery partition`).
# `--fuzz` adds clang and its runtime, for the libFuzzer targets of `make fuzz` only: the GCC
# builds of `make test` and `make asan` replay the fuzz corpora without them, so CI does not
# download a second compiler.
# Idempotent: checks each package first and runs `apt-get update` only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libnlopt-dev libglpk-dev
  python3 python3-dev pybind11-dev python3-numpy python3-pytest python3-matplotlib python3-pandas
  libtorch-dev python3-torch python3-sklearn libopenblas0-pthread
  libopenmpi-dev openmpi-bin libgloo-dev
  libsqlite3-dev coinor-libcbc-dev libeigen3-dev libonnx-dev
  chromium
)
if [ "${1:-}" = "--fuzz" ]; then
  packages+=(clang-14 libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
