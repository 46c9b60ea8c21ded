#!/usr/bin/env bash
# Installs the Debian packages that building and testing tensortune need, plus
# any named as arguments, skipping those already installed (so it is fast when
# there is nothing to do), and ONNX Runtime (the npm package onnxruntime-node,
# the reference and peer of the model tests and benchmarks) into tools/ort.
# Runs apt-get as root, or through sudo otherwise.
#
# usage: scripts/setup.sh [extra-package ...]
set -euo pipefail

packages=(cmake ninja-build g++ python3 nlohmann-json3-dev libcli11-dev libxgboost-dev
          libonnx-dev libprotobuf-dev python3-onnx libonnx-testdata nodejs
          googletest libgtest-dev libbenchmark-dev libdnnl-dev libopenblas-dev libssl-dev
          clang-format libopenmpi-dev openmpi-bin openssh-client "$@")

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
  fi
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ONNX Runtime, at the version package-lock.json pins. npm comes with
# NodeSource's nodejs (the one these machines have); Debian's needs its own
# package. onnxruntime-node's install script would download CUDA files from
# a host that cannot be reached: skipped (the CPU runtime is in the package).
if ! command -v npm >/dev/null; then
  "$0" npm
fi
ort=$(cd "$(dirname "${BASH_SOURCE[0]}")/../tools/ort" && pwd)
if [ ! -f "$ort/node_modules/onnxruntime-node/package.json" ]; then
  echo "setup: installing onnxruntime-node into $ort" >&2
  (cd "$ort" && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error)
fi
