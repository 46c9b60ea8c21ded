// Hand-written expert schedules against oneDNN and OpenBLAS, side by side in
// one run, on 1 and 2 threads: float32 matmul 1024^3 (examples/
// matmul_1024_expert.json, or matmul_1024_expert_avx2.json where vectors are
// narrower than 64 bytes) and the ResNet-50 3x3 64->64 conv at 56x56, batch 1
// (examples/conv2d_resnet_3x3_expert.json, 8-lane vectors fit either).
// Prints GFLOP/s per case and, at the end, tensortune's ratio to each peer.
//
//   build/bench/kernels_bench [--benchmark_repetitions=5] [examples dir]
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <dnnl.hpp>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "tensortune/codegen/backend.h"
#include "tensortune/lower/lower.h"
#include "tensortune/object/serialize.h"
#include "tensortune/schedule/state.h"
#include "tensortune/te/evaluator.h"
#include "tensortune/te/task.h"

namespace tt = tensortune;

extern "C" void openblas_set_num_threads(int);

namespace {

std::string g_examples = TT_SOURCE_DIR "/examples";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) tt::fail(tt::ErrorKind::kNotFound, "cannot open '", path, "'");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// A compiled expert kernel for `threads` cores, with its inputs and outputs.
struct Kernel {
  tt::codegen::Module module;
  tt::codegen::KernelFn fn = nullptr;
  std::vector<tt::te::NDArray> arrays;
  std::vector<void*> args;
  double flops = 0;
};

/// The expert schedule for this machine: `name`.json is written for 64-byte
/// vectors (AVX-512, 32 registers); where vectors are narrower and an
/// `name`_avx2.json exists, that one (a register tile that fits 16 registers).
std::string expert_file(const std::string& name, const tt::ir::Target& target) {
  std::string narrow = g_examples + "/" + name + "_avx2.json";
  if (tt::ir::hardware_params(target)->vector_bytes < 64 && std::ifstream(narrow).good()) {
    return narrow;
  }
  return g_examples + "/" + name + ".json";
}

Kernel build_expert(const std::string& workload, const std::string& args, const std::string& expert,
                    int threads) {
  auto target = tt::ir::Target::parse("c -mcpu=native -num-cores=" + std::to_string(threads));
  auto task = tt::te::Task::make(tt::te::make_named_workload_from_text(workload, args), target);
  auto tensors = tt::te::workload_tensors(task->workload);
  tt::schedule::ComputeDAG dag(tensors);
  std::string state_file = expert_file(expert, target);
  std::fprintf(stderr, "expert schedule %s\n", state_file.c_str());
  auto state =
      tt::load_json_as<tt::schedule::State>(tt::parse_json_text(read_file(state_file), state_file));
  auto func = tt::lower::lower(tt::schedule::replay(dag, state), "expert");
  Kernel k;
  k.module = tt::codegen::build_module({func}, target);
  k.fn = k.module.get("expert");
  k.arrays = tt::te::random_inputs(tensors.inputs, 7);
  for (const auto& t : tensors.outputs) k.arrays.emplace_back(t.dtype(), t.shape());
  for (auto& a : k.arrays) k.args.push_back(a.data());
  k.flops = dag.flop_count();
  return k;
}

void set_threads(int threads) {
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

void report_gflops(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// ---- matmul 1024^3 ----

constexpr int64_t kN = 1024;

void BM_matmul_tensortune(benchmark::State& state) {
  int threads = static_cast<int>(state.range(0));
  static std::map<int, Kernel> kernels;
  if (!kernels.count(threads)) {
    kernels.emplace(threads,
                    build_expert("matmul", "1024,1024,1024", "matmul_1024_expert", threads));
  }
  Kernel& k = kernels.at(threads);
  set_threads(threads);
  for (auto _ : state) k.fn(k.args.data());
  report_gflops(state, k.flops);
}

struct GemmData {
  std::vector<float> a, b, c;
  GemmData() : a(kN * kN, 0.5f), b(kN * kN, 0.25f), c(kN * kN) {}
};

void BM_matmul_onednn(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  static GemmData d;
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', kN, kN, kN, 1.0f, d.a.data(), kN, d.b.data(), kN, 0.0f, d.c.data(), kN);
  }
  report_gflops(state, 2.0 * kN * kN * kN);
}

void BM_matmul_openblas(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  static GemmData d;
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f, d.a.data(), kN,
                d.b.data(), kN, 0.0f, d.c.data(), kN);
  }
  report_gflops(state, 2.0 * kN * kN * kN);
}

// ---- conv2d 3x3 64->64 at 56x56 (ResNet-50), NCHW ----

void BM_conv_tensortune(benchmark::State& state) {
  int threads = static_cast<int>(state.range(0));
  static std::map<int, Kernel> kernels;
  if (!kernels.count(threads)) {
    kernels.emplace(threads, build_expert("conv2d_nchw", "1,64,56,56,64,3,3,1,1",
                                          "conv2d_resnet_3x3_expert", threads));
  }
  Kernel& k = kernels.at(threads);
  set_threads(threads);
  for (auto _ : state) k.fn(k.args.data());
  report_gflops(state, k.flops);
}

// oneDNN picks its own layouts (format_tag::any); the reorders into them are
// done once outside the timed loop, which flatters oneDNN (peers.md).
void BM_conv_onednn(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  static engine eng(engine::kind::cpu, 0);
  stream s(eng);
  memory::dims src_dims = {1, 64, 56, 56}, wei_dims = {64, 64, 3, 3}, dst_dims = {1, 64, 56, 56};
  auto src_md = memory::desc(src_dims, dt::f32, tag::any);
  auto wei_md = memory::desc(wei_dims, dt::f32, tag::any);
  auto dst_md = memory::desc(dst_dims, dt::f32, tag::any);
  auto desc = convolution_forward::desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                        src_md, wei_md, dst_md, {1, 1}, {1, 1}, {1, 1});
  auto pd = convolution_forward::primitive_desc(desc, eng);
  memory src(pd.src_desc(), eng), wei(pd.weights_desc(), eng), dst(pd.dst_desc(), eng);
  std::fill_n(static_cast<float*>(src.get_data_handle()), pd.src_desc().get_size() / 4, 0.5f);
  std::fill_n(static_cast<float*>(wei.get_data_handle()), pd.weights_desc().get_size() / 4, 0.25f);
  convolution_forward conv(pd);
  for (auto _ : state) {
    conv.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    s.wait();
  }
  report_gflops(state, 2.0 * 64 * 64 * 9 * 56 * 56);
}

// Collects the median GFLOP/s of every case, for the ratio table.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      auto it = run.counters.find("GFLOP/s");
      if (it != run.counters.end()) gflops_[run.benchmark_name()] = it->second.value / 1e9;
    }
  }
  void print_ratios() const {
    std::cout << "\ntensortune / peer, GFLOP/s ratio (same run):\n";
    for (const char* op : {"matmul", "conv"}) {
      for (int threads : {1, 2}) {
        double ours = find(std::string("BM_") + op + "_tensortune", threads);
        for (const char* peer : {"onednn", "openblas"}) {
          double theirs = find(std::string("BM_") + op + "_" + peer, threads);
          if (ours > 0 && theirs > 0) {
            std::printf("  %-6s %d thread(s): tensortune %6.1f  %-8s %6.1f  ratio %.2f\n", op,
                        threads, ours, peer, theirs, ours / theirs);
          }
        }
      }
    }
  }

 private:
  double find(const std::string& prefix, int threads) const {
    for (const auto& [name, value] : gflops_) {
      if (name.rfind(prefix + "/" + std::to_string(threads), 0) == 0) return value;
    }
    return 0;
  }
  std::map<std::string, double> gflops_;
};

}  // namespace

BENCHMARK(BM_matmul_tensortune)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_onednn)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_matmul_openblas)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_conv_tensortune)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_conv_onednn)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (argc > 1) g_examples = argv[1];
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  benchmark::Shutdown();
  return 0;
}
