#!/usr/bin/env bash
# Tunes the cases of tuned_bench (matmul 512^3, 1024^3, 2048^3, dense
# 1x1024x1024, BERT-base's dense layers 128xKxN, the ResNet-50 3x3 and 1x1
# convolutions in NHWC, two 3x3 ones also in NCHW) on this machine, one log per case in DIR, then runs tuned_bench on the logs: the
# tuned kernels against oneDNN and OpenBLAS in the same run. Logs resume:
# running it again adds TRIALS new trials per case.
#
# usage: bench/tune_cases.sh [DIR] [TRIALS]     (defaults: build-release/tuned, 1000)
# environment: TT_BUILD_DIR (default build-release), TT_THREADS (default 2),
#   TT_CASES (a space-separated subset of the case names below)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TT_BUILD_DIR:-$root/build-release}
dir=${1:-$build/tuned}
trials=${2:-1000}
threads=${TT_THREADS:-2}
mkdir -p "$dir"

"$root/scripts/setup.sh"
# A build folder that exists is used as it is configured (TT_BUILD_DIR=build
# reuses the test build); a new one is a Release build without the tests.
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTT_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" -j 2 --target tensortune-cli tensortune-worker tuned_bench

declare -A args=(
  [matmul_512]="matmul 512,512,512"
  [matmul_1024]="matmul 1024,1024,1024"
  [matmul_2048]="matmul 2048,2048,2048"
  [dense_1x1024x1024]="dense 1,1024,1024"
  [dense_128x768x768]="dense 128,768,768"
  [dense_128x768x3072]="dense 128,3072,768"
  [dense_128x3072x768]="dense 128,768,3072"
  [conv_3x3_64_64_56]="conv2d_nhwc 1,64,56,56,64,3,3,1,1"
  [conv_3x3_128_128_28]="conv2d_nhwc 1,128,28,28,128,3,3,1,1"
  [conv_3x3_256_256_14]="conv2d_nhwc 1,256,14,14,256,3,3,1,1"
  [conv_3x3_512_512_7]="conv2d_nhwc 1,512,7,7,512,3,3,1,1"
  [conv_1x1_64_256_56]="conv2d_nhwc 1,64,56,56,256,1,1,1,0"
  [conv_3x3_64_64_56_nchw]="conv2d_nchw 1,64,56,56,64,3,3,1,1"
  [conv_3x3_512_512_7_nchw]="conv2d_nchw 1,512,7,7,512,3,3,1,1"
)
cases=${TT_CASES:-"matmul_512 matmul_1024 matmul_2048 dense_1x1024x1024 dense_128x768x768 dense_128x768x3072 dense_128x3072x768 conv_3x3_64_64_56 conv_3x3_128_128_28 conv_3x3_256_256_14 conv_3x3_512_512_7 conv_1x1_64_256_56 conv_3x3_64_64_56_nchw conv_3x3_512_512_7_nchw"}
for name in $cases; do
  read -r workload shape <<< "${args[$name]}"
  echo "== $name: $trials trials" >&2
  # min-repeat-ms: timings of 20 ms or more, so that noise picks no winner.
  "$build/tensortune" tune --workload "$workload" --args "$shape" \
    --target "c -mcpu=native -num-cores=$threads" --trials "$trials" --batch-size 64 \
    --min-repeat-ms 20 --log "$dir/$name.log" --json > "$dir/$name.json"
done
# The speed of a shared VM drifts by tens of percent over minutes: ten
# repetitions of each kernel and peer, interleaved at random, and the
# medians compared, so that no drift lands on one side only.
# Only the cases tuned here (their peers too): "^(matmul_1024|...)/".
filter="^($(echo $cases | tr ' ' '|'))/"
"$build/bench/tuned_bench" --threads "$threads" --log "$dir"/*.log --benchmark_filter="$filter" \
  --benchmark_repetitions=10 \
  --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2 \
  --benchmark_report_aggregates_only=true
