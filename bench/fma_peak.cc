// The machine's measured multiply-add ceiling (fma_peak.h) on 1..N threads,
// for reading any GFLOP/s figure against:
//
//   build-release/bench/fma_peak [--target "c -mcpu=native"] [--threads 2] [--json]
#include "fma_peak.h"

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "tensortune/support/error.h"

int main(int argc, char** argv) {
  std::string target_text = "c -mcpu=native";
  int max_threads = 2;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--target" && i + 1 < argc) {
      target_text = argv[++i];
    } else if (a == "--threads" && i + 1 < argc) {
      max_threads = std::atoi(argv[++i]);
    } else if (a == "--json") {
      json = true;
    } else {
      std::fprintf(stderr,
                   "unknown argument '%s'; usage: fma_peak [--target T] [--threads N] [--json]\n",
                   a.c_str());
      return 1;
    }
  }
  if (max_threads < 1) {
    std::fprintf(stderr, "--threads must be at least 1\n");
    return 1;
  }
  try {
    auto target = tensortune::ir::Target::parse(target_text);
    nlohmann::json out = {{"target", target.str()}, {"gflops", nlohmann::json::object()}};
    for (int t = 1; t <= max_threads; ++t) {
      double g = tensortune::bench::measure_fma_peak_gflops(target, t);
      out["gflops"][std::to_string(t)] = g;
      if (!json) {
        std::printf("%d thread(s): %.1f GFLOP/s (float multiply-adds, %lld-byte vectors)\n", t, g,
                    static_cast<long long>(tensortune::ir::hardware_params(target)->vector_bytes));
      }
    }
    if (json) std::printf("%s\n", out.dump().c_str());
  } catch (const tensortune::Error& e) {
    std::fprintf(stderr, "fma_peak: %s\n", e.what());
    return 1;
  }
  return 0;
}
