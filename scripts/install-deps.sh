#!/usr/bin/env bash
# Installs the Debian 12 packages orrery needs to build, test and benchmark (NLopt and GLPK: the
# optimizer of `orrery libra`; chromium: the browser test of `orrery report` opens the HTML page
# headless).
# Idempotent: checks each package first and runs `apt-get update` only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libnlopt-dev libglpk-dev
  python3
  chromium
)

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
