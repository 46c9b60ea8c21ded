#!/usr/bin/env bash
# Installs the Debian packages that building and testing tensortune need, plus
# any named as arguments, skipping those already installed (so it is fast when
# there is nothing to do). Runs apt-get as root, or through sudo otherwise.
#
# usage: scripts/setup.sh [extra-package ...]
set -euo pipefail

packages=(cmake ninja-build g++ python3 nlohmann-json3-dev libcli11-dev libxgboost-dev
          googletest libgtest-dev libbenchmark-dev libdnnl-dev libopenblas-dev
          clang-format "$@")

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  sudo=(sudo)
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
