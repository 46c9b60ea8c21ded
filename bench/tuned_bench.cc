// Tuned kernels against oneDNN and OpenBLAS, side by side in one run: the
// best schedule that record logs hold for each case, built for the machine
// this runs on, timed beside the peers on the same number of threads.
// Cases: matmul 512^3, 1024^3, 2048^3, dense 1x1024x1024, the dense layers
// of BERT-base (128 x K x N) and the ResNet-50
// 3x3 and 1x1 convolutions (batch 1) in NHWC, oneDNN's convolution in the
// layout it picks. Weights a schedule pre-packs are packed once, outside the
// timed loop, as a compiled model does at load time. Ends with a table of
// the ratios. A case no log has a record for is skipped (bench/tune_cases.sh
// makes the logs).
//
//   build-release/bench/tuned_bench --log DIR/*.log [--threads 2]
//       [--benchmark_repetitions=3]
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <dnnl.hpp>
#include <iostream>
#include <map>
#include <optional>

#include "fma_peak.h"
#include "tensortune/codegen/build.h"
#include "tensortune/measure/record.h"
#include "tensortune/te/evaluator.h"
#include "tensortune/te/task.h"

namespace tt = tensortune;

extern "C" void openblas_set_num_threads(int);

namespace {

struct Case {
  std::string name, workload, args;
  enum class Kind { kGemm, kDense, kConv } kind;
  int64_t m = 0, n = 0, k = 0;                                 // gemm, dense
  int64_t c = 0, hw = 0, out = 0, r = 0, stride = 1, pad = 0;  // conv (square)
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t n : {512, 1024, 2048}) {
    std::string s = std::to_string(n);
    out.push_back({"matmul_" + s, "matmul", s + "," + s + "," + s, Case::Kind::kGemm, n, n, n});
  }
  out.push_back({"dense_1x1024x1024", "dense", "1,1024,1024", Case::Kind::kDense, 1, 1024, 1024});
  // The products of a BERT-base encoder layer (sequence 128, hidden 768):
  // what bounds a transformer's latency against ONNX Runtime.
  for (auto [n, k] : {std::pair<int64_t, int64_t>{768, 768}, {3072, 768}, {768, 3072}}) {
    std::string s = "128," + std::to_string(n) + "," + std::to_string(k);
    out.push_back({"dense_128x" + std::to_string(k) + "x" + std::to_string(n), "dense", s,
                   Case::Kind::kDense, 128, n, k});
  }
  struct Conv {
    int64_t c, hw, out, r;
  };
  for (Conv v : {Conv{64, 56, 64, 3}, Conv{128, 28, 128, 3}, Conv{256, 14, 256, 3},
                 Conv{512, 7, 512, 3}, Conv{64, 56, 256, 1}}) {
    int64_t pad = v.r / 2;
    Case cs{"conv_" + std::to_string(v.r) + "x" + std::to_string(v.r) + "_" + std::to_string(v.c) +
                "_" + std::to_string(v.out) + "_" + std::to_string(v.hw),
            "conv2d_nhwc",
            "1," + std::to_string(v.c) + "," + std::to_string(v.hw) + "," + std::to_string(v.hw) +
                "," + std::to_string(v.out) + "," + std::to_string(v.r) + "," +
                std::to_string(v.r) + ",1," + std::to_string(pad),
            Case::Kind::kConv};
    cs.c = v.c;
    cs.hw = v.hw;
    cs.out = v.out;
    cs.r = v.r;
    cs.pad = pad;
    out.push_back(cs);
  }
  // The layout ONNX hands in, where the search has to find how to vectorize
  // (56 and 7 columns are no whole number of 16-lane vectors). oneDNN picks
  // its own layouts either way.
  for (const std::string name : {"conv_3x3_64_64_56", "conv_3x3_512_512_7"}) {
    Case nchw =
        *std::find_if(out.begin(), out.end(), [&](const Case& c) { return c.name == name; });
    nchw.name += "_nchw";
    nchw.workload = "conv2d_nchw";
    out.push_back(nchw);
  }
  return out;
}

int g_threads = 2;
std::vector<tt::measure::Record> g_records;

void set_threads(int threads) {
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

void report(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

/// The tuned kernel of a case, built once, its weights packed.
struct Tuned {
  tt::codegen::StateBuild build;
  tt::codegen::KernelFn fn = nullptr;
  std::vector<tt::te::NDArray> arrays;
  std::vector<void*> args;
  double flops = 0;
  double logged_latency = 0;
};

std::optional<Tuned> tuned(const Case& c) {
  auto target = tt::ir::Target::parse("c -mcpu=native -num-cores=" + std::to_string(g_threads));
  auto task = tt::te::Task::make(tt::te::make_named_workload_from_text(c.workload, c.args), target);
  auto best = tt::measure::best_for(g_records, task, tt::measure::ContextMatch::any());
  if (!best) return std::nullopt;
  auto tensors = tt::te::workload_tensors(task->workload);
  tt::schedule::ComputeDAG dag(tensors);
  Tuned t;
  t.build =
      tt::codegen::build_states(dag, {best->input.state}, target, tt::ir::PassContext::make())[0];
  if (!t.build.ok()) tt::fail(tt::ErrorKind::kRuntime, c.name, ": ", t.build.error);
  t.fn = t.build.module.get(t.build.function);
  std::vector<tt::te::NDArray> inputs = tt::te::random_inputs(tensors.inputs, 7);
  t.arrays = tt::codegen::pack_inputs(t.build.module, t.build.packers, inputs);
  for (const auto& o : tensors.outputs) t.arrays.emplace_back(o.dtype(), o.shape());
  for (auto& a : t.arrays) t.args.push_back(a.data());
  t.flops = dag.flop_count();
  t.logged_latency = best->result.mean_cost();
  return t;
}

void run_tuned(benchmark::State& state, const Case& c) {
  static std::map<std::string, std::optional<Tuned>> built;
  if (!built.count(c.name)) built[c.name] = tuned(c);
  auto& t = built[c.name];
  if (!t) {
    state.SkipWithError("no record of this case in the logs");
    return;
  }
  set_threads(g_threads);
  for (auto _ : state) t->fn(t->args.data());
  report(state, t->flops);
}

void run_gemm(benchmark::State& state, const Case& c, bool openblas) {
  set_threads(g_threads);
  std::vector<float> a(c.m * c.k, 0.5f), b(c.k * c.n, 0.25f), out(c.m * c.n);
  // dense: out = data . weight^T with weight [N, K].
  bool trans = c.kind == Case::Kind::kDense;
  for (auto _ : state) {
    if (openblas) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, trans ? CblasTrans : CblasNoTrans, c.m, c.n, c.k,
                  1.0f, a.data(), c.k, b.data(), trans ? c.k : c.n, 0.0f, out.data(), c.n);
    } else {
      dnnl_sgemm('N', trans ? 'T' : 'N', c.m, c.n, c.k, 1.0f, a.data(), c.k, b.data(),
                 trans ? c.k : c.n, 0.0f, out.data(), c.n);
    }
  }
  report(state, 2.0 * c.m * c.n * c.k);
}

void run_conv(benchmark::State& state, const Case& c) {
  set_threads(g_threads);
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  static engine eng(engine::kind::cpu, 0);
  stream s(eng);
  int64_t o = (c.hw + 2 * c.pad - c.r) / c.stride + 1;
  memory::dims src = {1, c.c, c.hw, c.hw}, wei = {c.out, c.c, c.r, c.r}, dst = {1, c.out, o, o};
  auto desc = convolution_forward::desc(
      prop_kind::forward_inference, algorithm::convolution_direct,
      memory::desc(src, dt::f32, tag::any), memory::desc(wei, dt::f32, tag::any),
      memory::desc(dst, dt::f32, tag::any), {c.stride, c.stride}, {c.pad, c.pad}, {c.pad, c.pad});
  auto pd = convolution_forward::primitive_desc(desc, eng);
  memory m_src(pd.src_desc(), eng), m_wei(pd.weights_desc(), eng), m_dst(pd.dst_desc(), eng);
  std::fill_n(static_cast<float*>(m_src.get_data_handle()), pd.src_desc().get_size() / 4, 0.5f);
  std::fill_n(static_cast<float*>(m_wei.get_data_handle()), pd.weights_desc().get_size() / 4,
              0.25f);
  convolution_forward conv(pd);
  for (auto _ : state) {
    conv.execute(s, {{DNNL_ARG_SRC, m_src}, {DNNL_ARG_WEIGHTS, m_wei}, {DNNL_ARG_DST, m_dst}});
    s.wait();
  }
  report(state, 2.0 * c.out * c.c * c.r * c.r * o * o);
}

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.error_occurred) continue;
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      auto it = run.counters.find("GFLOP/s");
      if (it != run.counters.end()) gflops_[run.run_name.function_name] = it->second.value / 1e9;
    }
  }
  void print(const std::vector<Case>& all, double peak) const {
    std::printf("\n%d thread(s), GFLOP/s (same run); ratio = tensortune / peer\n", g_threads);
    std::printf("multiply-add peak on %d thread(s), measured after the cases: %.1f GFLOP/s\n",
                g_threads, peak);
    std::printf("  %-22s %10s %10s %10s %8s %8s %7s %7s\n", "case", "tensortune", "oneDNN",
                "OpenBLAS", "/oneDNN", "/OpenBLAS", "tt%pk", "dnnl%pk");
    for (const auto& c : all) {
      double ours = get(c.name + "/tensortune"), dnnl = get(c.name + "/onednn"),
             blas = get(c.name + "/openblas");
      if (ours <= 0) continue;
      std::printf("  %-22s %10.1f %10.1f %10s %8.2f %8s %6.0f%% %6.0f%%\n", c.name.c_str(), ours,
                  dnnl, blas > 0 ? std::to_string(blas).substr(0, 6).c_str() : "-",
                  dnnl > 0 ? ours / dnnl : 0.0,
                  blas > 0 ? std::to_string(ours / blas).substr(0, 4).c_str() : "-",
                  100 * ours / peak, 100 * dnnl / peak);
    }
  }

 private:
  double get(const std::string& name) const {
    auto it = gflops_.find(name);
    return it == gflops_.end() ? 0 : it->second;
  }
  std::map<std::string, double> gflops_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      g_threads = std::atoi(argv[++i]);
    } else if (a == "--log") {
      while (i + 1 < argc && argv[i + 1][0] != '-') {
        auto contents = tt::measure::load_records(argv[++i]);
        g_records.insert(g_records.end(), contents.records.begin(), contents.records.end());
      }
    } else {
      std::fprintf(stderr, "unknown argument '%s'; usage: tuned_bench --log LOG... [--threads N]\n",
                   a.c_str());
      return 1;
    }
  }
  std::vector<Case> all = cases();
  for (const auto& c : all) {
    auto add = [&](const std::string& who, auto fn) {
      benchmark::RegisterBenchmark((c.name + "/" + who).c_str(), fn)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    };
    add("tensortune", [c](benchmark::State& s) { run_tuned(s, c); });
    if (c.kind == Case::Kind::kConv) {
      add("onednn", [c](benchmark::State& s) { run_conv(s, c); });
    } else {
      add("onednn", [c](benchmark::State& s) { run_gemm(s, c, false); });
      add("openblas", [c](benchmark::State& s) { run_gemm(s, c, true); });
    }
  }
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  auto target = tt::ir::Target::parse("c -mcpu=native -num-cores=" + std::to_string(g_threads));
  reporter.print(all, tt::bench::measure_fma_peak_gflops(target, g_threads));
  benchmark::Shutdown();
  return 0;
}
