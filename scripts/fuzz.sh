#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz with clang, ASan and UBSan in
# their own build directory, and runs each for a bounded time. Exits non-zero
# when a harness finds a crash, a sanitizer report, a timeout or a leak; the
# input that triggered it is written to $build/artifacts/ and printed.
#
# usage: scripts/fuzz.sh [seconds per harness, default 60] [extra libFuzzer flags ...]
# environment: TT_FUZZ_BUILD_DIR (default build-fuzz), TT_JOBS (default 2),
#   TT_FUZZ_CC / TT_FUZZ_CXX (default clang-16 / clang++-16, installed when missing)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TT_FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${TT_JOBS:-2}
seconds=${1:-60}
shift || true

# clang 16 is Debian 12's newest: clang 14 (its default) cannot compile C++20
# code that captures structured bindings in lambdas, which the library uses.
cc=${TT_FUZZ_CC:-clang-16}
cxx=${TT_FUZZ_CXX:-clang++-16}
if [ -z "${TT_FUZZ_CXX:-}" ]; then
  "$root/scripts/setup.sh" clang-16 libclang-rt-16-dev llvm-16
else
  "$root/scripts/setup.sh"
fi
# -Werror off: this build exists to find crashes, and clang warns about
# things the project's compiler (g++) does not.
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DTT_BUILD_FUZZ=ON -DTT_BUILD_TESTS=OFF -DTT_BUILD_BENCH=OFF -DTT_WERROR=OFF
fuzzers=()
for src in "$root"/tests/fuzz/*_fuzz.cc; do
  fuzzers+=("$(basename "$src" .cc)")
done
cmake --build "$build" -j "$jobs" --target "${fuzzers[@]}"

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Stack traces with function names and lines need the compiler's llvm-symbolizer.
symbolizer="$(dirname "$(readlink -f "$(command -v "$cxx")")")/llvm-symbolizer"
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && [ -x "$symbolizer" ]; then
  export ASAN_SYMBOLIZER_PATH="$symbolizer"
fi
status=0
for name in "${fuzzers[@]}"; do
  # New inputs go to the first directory (in the build); the checked-in seeds stay untouched.
  work="$build/corpus/$name"
  seeds="$root/tests/fuzz/corpus/${name%_fuzz}"
  mkdir -p "$work" "$build/artifacts"
  dict=()
  if [ -f "$root/tests/fuzz/${name%_fuzz}.dict" ]; then
    dict=(-dict="$root/tests/fuzz/${name%_fuzz}.dict")
  fi
  echo "fuzz: running $name for ${seconds}s" >&2
  if ! "$build/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$build/artifacts/$name-" "${dict[@]}" "$@" \
      "$work" "$seeds"; then
    echo "fuzz: $name found a problem; reproduce with: $build/$name <artifact>" >&2
    ls -1 "$build/artifacts/$name-"* >&2 2>/dev/null || true
    status=1
  fi
done
exit $status
