// The machine's floating-point ceiling, measured: GFLOP/s of a loop of
// independent float multiply-adds on the target's vector width, built by the
// compiler and flags the kernels get and run on N threads. The benches read
// their ratios against it: a kernel at 90% of it has little left to find,
// and a goal that needs more than 100% cannot be met on this machine.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "tensortune/codegen/backend.h"
#include "tensortune/ir/target.h"

namespace tensortune::bench {

/// Multiply-adds per iteration and lane: twelve chains, enough to cover the
/// FMA latency of two pipes on current x86 cores (4 cycles x 2) while
/// leaving registers for the two constants on a 16-register ISA.
inline constexpr int kFmaChains = 12;

/// The C of the peak loop for vectors of `vector_bytes`.
inline std::string fma_peak_source(int64_t vector_bytes) {
  std::string chains, init, sum;
  for (int k = 0; k < kFmaChains; ++k) {
    std::string a = "a" + std::to_string(k);
    init += "    vf " + a + " = b * (float)" + std::to_string(k + 1) + ";\n";
    chains += "      " + a + " = " + a + " * b + c;\n";
    sum += " + " + a + "[0]";
  }
  // b < 1 and c > 0: every chain converges to c / (1 - b), no overflow, no
  // denormals. GNU C contracts a * b + c into one FMA where the target has it.
  return "#include <omp.h>\n#include <stdint.h>\n"
         "typedef float vf __attribute__((vector_size(" +
         std::to_string(vector_bytes) +
         ")));\n"
         "int32_t fma_peak(void** args) {\n"
         "  const int64_t n = *(const int64_t*)args[0];\n"
         "  const int32_t threads = *(const int32_t*)args[1];\n"
         "  float sink = 0.0f;\n"
         "  const double t0 = omp_get_wtime();\n"
         "  #pragma omp parallel num_threads(threads) reduction(+ : sink)\n"
         "  {\n"
         "    vf b = {0}, c = {0};\n"
         "    b += 0.999f;\n"
         "    c += 1e-3f;\n" +
         init + "    for (int64_t i = 0; i < n; ++i) {\n" + chains +
         "    }\n"
         "    sink += 0.0f" +
         sum +
         ";\n"
         "  }\n"
         "  *(double*)args[2] = omp_get_wtime() - t0;\n"
         "  *(float*)args[3] = sink;\n"
         "  return 0;\n"
         "}\n";
}

/// The best of `tries` timings of about `seconds` each of the peak loop on
/// `threads` threads, in GFLOP/s (two flops per lane and multiply-add).
inline double measure_fma_peak_gflops(const ir::Target& target, int threads, double seconds = 0.2,
                                      int tries = 3) {
  const int64_t vector_bytes = ir::hardware_params(target)->vector_bytes;
  codegen::Module module =
      codegen::kernel_sources(target)->compile(fma_peak_source(vector_bytes), {});
  codegen::KernelFn fn = module.get("fma_peak");
  auto time = [&](int64_t n) {
    int32_t t = threads;
    double elapsed = 0;
    float sink = 0;
    void* args[] = {&n, &t, &elapsed, &sink};
    fn(args);
    return elapsed;
  };
  int64_t n = 1 << 16;
  double t = time(n);
  for (; t < seconds / 4; t = time(n)) n *= 4;
  n = static_cast<int64_t>(static_cast<double>(n) * seconds / std::max(t, 1e-6));
  const double flops =
      2.0 * kFmaChains * static_cast<double>(vector_bytes / 4) * static_cast<double>(n) * threads;
  double best = 0;
  for (int k = 0; k < tries; ++k) best = std::max(best, flops / time(n) * 1e-9);
  return best;
}

}  // namespace tensortune::bench
