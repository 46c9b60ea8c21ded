// Cost of the object layer on a large expression DAG: save, load, structural
// equality and hash. The DAG has about 100,000 nodes in 2,000 layers of 50
// columns; every node uses the node of its own column in the layer below and
// one random node of that layer, so most nodes have two parents, and every
// 100th layer is made of reductions, each binding its own variable. Its depth
// (about 2,100) stays well below kMaxGraphDepth.
//
// save_string and load_string write and read the text directly; the *Dom
// benchmarks time the nlohmann::json DOM paths (save_json + dump, parse +
// load_json) that callers holding a json value use, for comparison.
//
//   build/bench/object_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "tensortune/ir/expr.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"

namespace tensortune {
namespace {

constexpr int kWidth = 50;
constexpr int kLayers = 2000;
constexpr int kReduceEvery = 100;

/// The DAG described above; the same seed gives a structurally equal DAG.
ir::Expr build_dag(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<ir::Expr> layer;
  for (int j = 0; j < kWidth; ++j) layer.push_back(ir::Var::make("v" + std::to_string(j)));
  const ir::BinaryOp ops[] = {ir::BinaryOp::kAdd, ir::BinaryOp::kSub, ir::BinaryOp::kMul,
                              ir::BinaryOp::kMin, ir::BinaryOp::kMax};
  for (int l = 1; l <= kLayers; ++l) {
    std::vector<ir::Expr> next;
    next.reserve(kWidth);
    for (int j = 0; j < kWidth; ++j) {
      const ir::Expr& other = layer[rng() % kWidth];
      if (l % kReduceEvery == 0) {
        ir::IterVar k = ir::IterVar::make("k", 16, ir::IterKind::kReduce);
        next.push_back(ir::reduce(ir::ReduceOp::kSum, layer[j] * k.expr() + other, {k}));
      } else {
        next.push_back(ir::binary(ops[rng() % 5], layer[j], other));
      }
    }
    layer = std::move(next);
  }
  ir::Expr root = layer[0];
  for (int j = 1; j < kWidth; ++j) root = root + layer[j];
  return root;
}

struct Fixture {
  ir::Expr dag = build_dag(42);
  ir::Expr twin = build_dag(42);  // built independently: no node in common
  std::string text = save_string(dag);
  size_t nodes = post_order(dag.ptr()).size();

  Fixture() {
    if (!structural_equal(dag, twin) || structural_hash(dag) != structural_hash(twin)) {
      std::fprintf(stderr, "object_bench: the two DAGs differ; the benchmark is broken\n");
      std::abort();
    }
    // BM_Load must time load_string's own reader, not its fallback to the DOM path.
    auto direct = detail::load_text_directly(text);
    if (text != save_json(dag).dump() || !direct ||
        !structural_equal(*direct, ObjectPtr(dag.ptr()))) {
      std::fprintf(stderr, "object_bench: save_string/load_string disagree with the DOM path\n");
      std::abort();
    }
    std::fprintf(stderr, "object_bench: %zu nodes, %zu bytes of JSON\n", nodes, text.size());
  }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

void set_counters(benchmark::State& state) {
  state.counters["nodes"] = static_cast<double>(fixture().nodes);
  state.counters["nodes/s"] = benchmark::Counter(static_cast<double>(fixture().nodes),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_SaveString(benchmark::State& state) {
  const Fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(save_string(f.dag));
  set_counters(state);
}

void BM_SaveJsonDomAndDump(benchmark::State& state) {
  const Fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(save_json(f.dag).dump());
  set_counters(state);
}

void BM_ParseOnly(benchmark::State& state) {
  const Fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(parse_json_text(f.text));
  set_counters(state);
}

void BM_Load(benchmark::State& state) {  // load_string: text to graph
  const Fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(load_string(f.text));
  set_counters(state);
}

void BM_LoadJsonDom(benchmark::State& state) {  // load_json of an already parsed DOM
  const Fixture& f = fixture();
  // Parsed here, not in the fixture: a DOM of 100,000 nodes fragments the heap
  // and slowed the benchmarks that ran after it was built.
  static const nlohmann::json doc = parse_json_text(f.text);
  for (auto _ : state) benchmark::DoNotOptimize(load_json(doc));
  set_counters(state);
}

void BM_StructuralEqual(benchmark::State& state) {
  const Fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(structural_equal(f.dag, f.twin));
  set_counters(state);
}

void BM_StructuralHash(benchmark::State& state) {
  const Fixture& f = fixture();
  for (auto _ : state) benchmark::DoNotOptimize(structural_hash(f.dag));
  set_counters(state);
}

BENCHMARK(BM_SaveString)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SaveJsonDomAndDump)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Load)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ParseOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LoadJsonDom)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StructuralEqual)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StructuralHash)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tensortune

BENCHMARK_MAIN();
