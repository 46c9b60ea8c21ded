#!/usr/bin/env bash
# Installs what is missing, builds everything (tests, benchmarks, programs)
# and runs every test. Two jobs by default: CI machines have two cores.
#
# usage: scripts/test.sh [ctest arguments, e.g. -L process or -R Subprocess]
# environment: TT_BUILD_DIR (default build, or build-sanitize with
#              TT_SANITIZE=1), TT_JOBS (default 2), TT_SANITIZE=1 (build the
#              library, the programs, the worker and the tests with
#              AddressSanitizer and UndefinedBehaviorSanitizer; any report
#              fails the test that triggered it)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${TT_JOBS:-2}
flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ "${TT_SANITIZE:-0}" = 1 ]; then
  build=${TT_BUILD_DIR:-$root/build-sanitize}
  flags+=(-DTT_SANITIZE=ON -DTT_BUILD_BENCH=OFF)
  # Every report is fatal. Workers cannot cap their address space under
  # ASan (its shadow memory): past the soft RSS limit malloc returns null,
  # which a candidate that allocates without end then reports as out of
  # memory. Leaks are not checked: the OpenMP and XGBoost runtimes keep
  # allocations for the process's life.
  # Candidates that crash on purpose (segv, fpe) must die of their signal, as
  # in any build, not of ASan's report; deep recursion (graphs at the depth
  # limit) needs the larger frames' stack.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=0:allocator_may_return_null=1:soft_rss_limit_mb=6144:handle_segv=0:handle_sigbus=0:handle_sigfpe=0}
  ulimit -s $((512 * 1024)) 2>/dev/null || ulimit -s unlimited 2>/dev/null || true
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
else
  build=${TT_BUILD_DIR:-$root/build}
fi

"$root/scripts/setup.sh"
cmake -S "$root" -B "$build" -G Ninja "${flags[@]}"
cmake --build "$build" -j "$jobs"
cd "$build"
# --timeout: a hung test fails on its own instead of stalling the whole run.
ctest --output-on-failure -j "$jobs" --timeout 600 "$@"
