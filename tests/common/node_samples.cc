#include "common/node_samples.h"

#include "common/graph_node_samples.h"
#include "common/te_node_samples.h"

#include <cmath>

#include "tensortune/ir/buffer.h"
#include "tensortune/ir/expr.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/ir/target.h"
#include "tensortune/lower/stmt.h"
#include "tensortune/measure/measurer.h"
#include "tensortune/measure/model_timing.h"
#include "tensortune/measure/mpi.h"
#include "tensortune/measure/protocol.h"
#include "tensortune/measure/rank_protocol.h"
#include "tensortune/measure/record.h"
#include "tensortune/object/serialize.h"
#include "tensortune/runtime/model_folder.h"
#include "tensortune/schedule/state.h"
#include "tensortune/search/evolutionary.h"
#include "tensortune/search/tuner.h"
#include "tensortune/te/task.h"

namespace tensortune::testing {
namespace {

using namespace ir;  // NOLINT: sample builders

template <class R>
ObjectPtr obj(const R& r) {
  return ObjectPtr(r.ptr());
}

std::map<std::string, std::function<ObjectPtr()>> build() {
  std::map<std::string, std::function<ObjectPtr()>> s;
  Var x = Var::make("x");
  s["ir.IntImm"] = [] { return obj(int_imm(-3, DataType::int_(8))); };
  s["ir.FloatImm"] = [] { return obj(float_imm(0.25, DataType::float16())); };
  s["ir.Var"] = [] { return obj(Var::make("v", DataType::int64())); };
  s["ir.Binary"] = [x] { return obj(floordiv(x, 3)); };
  s["ir.Compare"] = [x] { return obj(x >= 2); };
  s["ir.Logical"] = [x] { return obj(logical_or(x<1, x> 5)); };
  s["ir.Not"] = [x] { return obj(logical_not(x < 1)); };
  s["ir.Select"] = [x] { return obj(select(x < 1, x, x * 2)); };
  s["ir.Cast"] = [x] { return obj(cast(DataType::float32(), x)); };
  s["ir.Call"] = [] { return obj(pow(float_imm(2.0), float_imm(0.5))); };
  s["ir.IterVar"] = [] { return obj(IterVar::make("k", 7, IterKind::kReduce)); };
  s["ir.Reduce"] = [x] {
    IterVar k = IterVar::make("k", 4, IterKind::kReduce);
    return obj(reduce(ReduceOp::kMax, k.expr() * x, {k}, k.expr() < x, int_imm(-1)));
  };
  s["ir.Buffer"] = [] {
    return obj(Buffer::make("buf", DataType::float32(), {4, 5}, {8, 1}, "local"));
  };
  s["ir.Target"] = [] {
    return obj(
        Target::parse("cuda -arch=sm_86 -host=\"c -mattr=avx2,fma -cflags=\\\"-O2 -g\\\"\""));
  };
  s["ir.HardwareParams"] = [] {
    return obj(hardware_params(Target::parse("c -mattr=avx512f -num-cores=8")));
  };
  s["ir.InstrumentSpec"] = [] {
    return obj(InstrumentSpec::make("print_ir", {{"filter", "lower_*"}, {"when", "both"}}));
  };
  s["ir.PassContext"] = [] {
    return obj(PassContext::make(PassContextOptions()
                                     .with_opt_level(3)
                                     .with_config("tir.max_unroll_step", 8)
                                     .with_disabled("unroll")
                                     .with_required("legalize")
                                     .with_instrument(InstrumentSpec::make("pass_names"))));
  };
  s["ir.BufferLoad"] = [] {
    Buffer b = Buffer::make("buf", DataType::float32(), {16});
    return obj(buffer_load(b, ramp(int_imm(4), int_imm(1), 8)));
  };
  s["ir.Ramp"] = [x] { return obj(ramp(x * 2, int_imm(3), 4)); };
  s["ir.Broadcast"] = [] { return obj(broadcast(float_imm(1.5), 16)); };
  s["ir.ProducerLoad"] = [] {
    te::Tensor a = te::placeholder({4, 4}, DataType::float32(), "A");
    Var i = Var::make("i");
    return obj(a(i, i + 1));
  };
  s["te.Task"] = [] {
    return obj(te::Task::make(te::make_named_workload_from_text("matmul", "8,8,8"),
                              Target::parse("c -num-cores=2").with_host(Target::parse("c"))));
  };
  // Schedules: every step type once, in a state that replays on matmul.
  {
    using namespace schedule;  // NOLINT: step builders
    std::map<std::string, Step> steps = {
        {"schedule.SplitStep", split(2, 0, {4, 2}, false)},
        {"schedule.FollowSplitStep", follow_split(2, 1, 0, 2)},
        {"schedule.FollowFusedSplitStep", follow_fused_split(2, 0, {0, 1}, 1, true)},
        {"schedule.ReorderStep", reorder(2, {2, 0, 1})},
        {"schedule.FuseStep", fuse(2, {0, 1})},
        {"schedule.AnnotationStep", annotate(2, 0, IterAnnotation::kParallel)},
        {"schedule.ComputeAtStep", compute_at(2, 3, 1)},
        {"schedule.ComputeInlineStep", compute_inline(4)},
        {"schedule.ComputeRootStep", compute_root(2)},
        {"schedule.CacheReadStep", cache_read(1, "local", {2, 3})},
        {"schedule.CacheWriteStep", cache_write(2, "global")},
        {"schedule.RfactorStep", rfactor(2, 3, 1)},
        {"schedule.StorageAlignStep", storage_align(2, 0, 16, 8)},
        {"schedule.StorageOrderStep", storage_order(2, {1, 0})},
        {"schedule.PragmaStep", pragma(2, 0, "auto_unroll_max_step=64")},
        {"schedule.LayoutRewriteStep", layout_rewrite(1)},
    };
    for (const auto& [key, step] : steps) s[key] = [step] { return obj(step); };
    s["schedule.State"] = [] {
      return obj(State::make({split(2, 0, {4}), split(2, 2, {8}), reorder(2, {0, 2, 1, 3, 4})}));
    };
  }
  // Loop-nest IR: one kernel that uses every statement kind.
  {
    using namespace lower;  // NOLINT: statement builders
    auto kernel = [] {
      Buffer a = Buffer::make("A", DataType::float32(), {8});
      Buffer t = Buffer::make("T", DataType::float32(), {8}, {}, "local");
      Var i = Var::make("i"), v = Var::make("v");
      Stmt body =
          seq({buffer_store(t, i, buffer_load(a, i) * 2.0),
               if_then_else(i < 4, buffer_store(a, i, buffer_load(t, i)), evaluate(int_imm(0)))});
      Stmt loop = for_loop(i, int_imm(0), int_imm(8), ForKind::kParallel, let_stmt(v, i + 1, body));
      return PrimFunc::make("kernel", {a}, 0, allocate(t, loop));
    };
    s["lower.PrimFunc"] = [kernel] { return obj(kernel()); };
    auto find = [kernel](StmtKind kind) {
      Stmt found;
      visit_stmts(kernel()->body, [&](const Stmt& st) {
        if (!found && st->kind() == kind) found = st;
      });
      return obj(found);
    };
    s["lower.For"] = [find] { return find(StmtKind::kFor); };
    s["lower.IfThenElse"] = [find] { return find(StmtKind::kIfThenElse); };
    s["lower.Allocate"] = [find] { return find(StmtKind::kAllocate); };
    s["lower.BufferStore"] = [find] { return find(StmtKind::kBufferStore); };
    s["lower.Seq"] = [find] { return find(StmtKind::kSeq); };
    s["lower.LetStmt"] = [find] { return find(StmtKind::kLetStmt); };
    s["lower.Evaluate"] = [find] { return find(StmtKind::kEvaluate); };
  }
  // Measurement messages and records, every field set to something other
  // than its default.
  {
    using namespace measure;  // NOLINT: message builders
    auto task = [] {
      return te::Task::make(te::make_named_workload_from_text("matmul", "8,8,8"),
                            Target::parse("c -num-cores=2"));
    };
    auto options = [] {
      auto o = make_node<RunnerOptions>();
      o->number = 2;
      o->repeat = 5;
      o->min_repeat_ms = 3;
      o->cooldown_ms = 1;
      o->flush_cache = true;
      o->flush_weights = true;
      o->fresh_activations = true;
      o->check = true;
      o->seed = 9;
      o->cache_dir = "/tmp/refs";
      o->simulate_ms = 25;
      return Ref<RunnerOptions>(o);
    };
    auto build_result = [] {
      auto b = make_node<BuildResult>();
      b->error_code = ErrorCode::kCompileError;
      b->error_message = "cc: error";
      b->library = "/tmp/x.so";
      b->function = "candidate_0";
      b->build_seconds = 0.5;
      b->pass_context_hash = Hash64(0xfedcba9876543210ull);
      b->instruments = {{"pass_names", {"simplify"}}};
      b->packed_inputs = {1};
      b->packers = {"candidate_0_pack1"};
      b->packed_elements = {4096};
      b->program_hash = Hash64(0x1234);
      b->host = "node-1";
      b->rank = 3;
      return Ref<BuildResult>(b);
    };
    s["measure.RunnerOptions"] = [options] { return obj(options()); };
    auto pool = [] {
      WorkerPoolOptions o;
      o.num_workers = 3;
      o.worker_path = "/opt/tt/worker";
      o.memory_limit_mb = 512;
      o.max_requests_per_worker = 7;
      o.env = {{"OMP_PROC_BIND", "close"}, {"A", ""}};
      o.name = "builder";
      o.handshake_timeout = std::chrono::milliseconds(1500);
      return o;
    };
    s["measure.WorkerPoolOptions"] = [pool] {
      return obj(Ref<WorkerPoolOptions>(make_node<WorkerPoolOptions>(pool())));
    };
    s["measure.LocalBuilderOptions"] = [pool] {
      auto o = make_node<LocalBuilderOptions>();
      o->parallelism = 2;
      o->timeout = std::chrono::milliseconds(2500);
      o->candidates_per_request = 4;
      o->cache_dir = "/tmp/modules";
      o->pool = pool();
      o->simulate = true;
      return obj(Ref<LocalBuilderOptions>(o));
    };
    s["measure.LocalRunnerOptions"] = [pool, options] {
      auto o = make_node<LocalRunnerOptions>();
      o->timing = *options();
      o->timeout = std::chrono::milliseconds(1);
      o->prepare_timeout = std::chrono::milliseconds(60000);
      o->pin_threads = true;
      o->pool = pool();
      return obj(Ref<LocalRunnerOptions>(o));
    };
    s["measure.ModelTimingOptions"] = [pool, options] {
      auto o = make_node<ModelTimingOptions>();
      o->candidates = 4;
      o->timing = *options();
      o->per_evaluation = std::chrono::milliseconds(300);
      o->pool = pool();
      return obj(Ref<ModelTimingOptions>(o));
    };

    s["measure.HelloRequest"] = [] {
      auto n = make_node<HelloRequest>();
      n->protocol_version = 7;
      return obj(Ref<HelloRequest>(n));
    };
    s["measure.WorkerInfo"] = [] {
      auto n = make_node<WorkerInfo>();
      n->protocol_version = 2;
      n->build_id = "tensortune 0.1.0 sources 0123456789abcdef";
      n->pid = 42;
      return obj(Ref<WorkerInfo>(n));
    };
    s["measure.CheckRequest"] = [task] {
      auto n = make_node<CheckRequest>();
      n->task = task();
      n->pass_context = PassContext::make(PassContextOptions().with_opt_level(1));
      n->workload_hash = Hash64(5);
      n->build = true;
      return obj(Ref<CheckRequest>(n));
    };
    s["measure.CheckReply"] = [] {
      auto n = make_node<CheckReply>();
      n->problems = {"no code generator for target kind 'cuda'"};
      return obj(Ref<CheckReply>(n));
    };
    s["measure.BuildRequest"] = [task] {
      auto n = make_node<BuildRequest>();
      n->task = task();
      n->states = {schedule::State::make({schedule::split(2, 0, {4})}), schedule::State::make()};
      n->pass_context = PassContext::make(PassContextOptions().with_opt_level(1));
      n->cache_dir = "/tmp/cache";
      n->workload_hash = Hash64(6);
      n->simulate = true;
      return obj(Ref<BuildRequest>(n));
    };
    s["measure.BuildResult"] = [build_result] { return obj(build_result()); };
    s["measure.BuildReply"] = [build_result] {
      auto n = make_node<BuildReply>();
      n->results = {build_result(), build_result()};
      n->task_hash = Hash64(7);
      n->task_nodes = 12;
      return obj(Ref<BuildReply>(n));
    };
    s["measure.RunRequest"] = [task, options] {
      auto n = make_node<RunRequest>();
      n->task = task();
      n->library = "/tmp/x.so";
      n->function = "candidate_1";
      n->packed_inputs = {1};
      n->packers = {"candidate_1_pack1"};
      n->packed_elements = {4096};
      n->options = options();
      n->workload_hash = Hash64(8);
      n->program_hash = Hash64(10);
      return obj(Ref<RunRequest>(n));
    };
    s["measure.PrepareRequest"] = [task, options] {
      auto n = make_node<PrepareRequest>();
      n->task = task();
      n->options = options();
      n->workload_hash = Hash64(9);
      return obj(Ref<PrepareRequest>(n));
    };
    s["measure.RunOutcome"] = [] {
      auto n = make_node<RunOutcome>();
      n->error_code = ErrorCode::kWrongAnswer;
      n->error_message = "output 0 differs";
      n->costs = {1e-3};
      n->run_seconds = 0.25;
      n->max_error = std::nan("");
      n->host = "node-2";
      n->rank = 5;
      return obj(Ref<RunOutcome>(n));
    };
    s["measure.MpiOptions"] = [] {
      auto n = make_node<MpiOptions>();
      n->runners_per_host = 2;
      n->rank_timeout = std::chrono::milliseconds(2500);
      n->target_given = true;
      return obj(Ref<MpiOptions>(n));
    };
    s["measure.RankInfo"] = [] {
      auto n = make_node<RankInfo>();
      n->protocol_version = 9;
      n->build_id = "tensortune 0.1.0 sources 0123456789abcdef";
      n->rank = 4;
      n->host = "node-3";
      n->cpu = "c -mcpu=znver4 -num-cores=64";
      n->cores = 64;
      return obj(Ref<RankInfo>(n));
    };
    s["measure.RankConfig"] = [pool, options] {
      auto n = make_node<RankConfig>();
      n->build.parallelism = 3;
      n->build.pool = pool();
      n->run.timing = *options();
      n->run.pin_threads = true;
      n->build_workers = 7;
      n->runner = true;
      return obj(Ref<RankConfig>(n));
    };
    s["measure.RankCheck"] = [task] {
      auto n = make_node<RankCheck>();
      n->task = task();
      n->pass_context = PassContext::make(PassContextOptions().with_opt_level(1));
      n->build = true;
      return obj(Ref<RankCheck>(n));
    };
    auto shipped = [] {
      auto n = make_node<ShippedLibrary>();
      n->sha256 = std::string(64, 'a');
      n->base64 = "AAEC";
      return Ref<ShippedLibrary>(n);
    };
    s["measure.ShippedLibrary"] = [shipped] { return obj(shipped()); };
    s["measure.RankBuild"] = [task] {
      auto n = make_node<RankBuild>();
      n->task = task();
      n->states = {schedule::State::make({schedule::split(2, 0, {4})})};
      n->pass_context = PassContext::make(PassContextOptions().with_opt_level(1));
      n->ship_libraries = true;
      return obj(Ref<RankBuild>(n));
    };
    s["measure.RankBuildReply"] = [build_result, shipped] {
      auto n = make_node<RankBuildReply>();
      n->results = {build_result()};
      n->libraries = {shipped()};
      return obj(Ref<RankBuildReply>(n));
    };
    s["measure.RankRun"] = [task, build_result, shipped] {
      auto n = make_node<RankRun>();
      n->task = task();
      n->built = {build_result()};
      n->best_s = 1e-3;
      n->abandon_factor = 4;
      n->libraries = {shipped()};
      return obj(Ref<RankRun>(n));
    };
    s["measure.RankRunReply"] = [] {
      auto o = make_node<RunOutcome>();
      o->costs = {2e-3};
      auto n = make_node<RankRunReply>();
      n->outcomes = {Ref<RunOutcome>(o)};
      return obj(Ref<RankRunReply>(n));
    };
    s["measure.RankStop"] = [] {
      auto n = make_node<RankStop>();
      n->reason = "refused";
      n->finalize = false;
      return obj(Ref<RankStop>(n));
    };
    auto candidate_step = [] {
      auto n = make_node<CandidateStepNode>();
      n->step = 3;
      n->task = 1;
      n->functions = {"k1_v0", "k1_v1"};
      n->args = {{0, 4, 5}, {0, 6, 5}};
      return Ref<CandidateStepNode>(n);
    };
    s["measure.CandidateStep"] = [candidate_step] { return obj(candidate_step()); };
    s["measure.ModelTimingRequest"] = [candidate_step, options] {
      auto n = make_node<ModelTimingRequest>();
      n->model_dir = "out/model";
      n->steps = {candidate_step()};
      n->timing = options();
      n->rounds = 2;
      n->threads = 1;
      return obj(Ref<ModelTimingRequest>(n));
    };
    auto task_choice = [] {
      auto n = make_node<TaskChoiceNode>();
      n->task = 1;
      n->chosen = 1;
      n->judged_seconds = {2e-3, 1.5e-3};
      return Ref<TaskChoiceNode>(n);
    };
    s["measure.TaskChoice"] = [task_choice] { return obj(task_choice()); };
    s["measure.ModelTimingReply"] = [task_choice] {
      auto n = make_node<ModelTimingReply>();
      n->tasks = {task_choice()};
      n->evaluations = 7;
      n->seconds = 0.5;
      return obj(Ref<ModelTimingReply>(n));
    };
    s["measure.RequestError"] = [] {
      auto n = make_node<RequestError>();
      n->kind = "not found";
      n->message = "unknown workload 'x'";
      return obj(Ref<RequestError>(n));
    };
    auto result = [] {
      MeasureResult r;
      r.costs = {1e-3, 2e-3};
      r.error_message = "";
      r.build_seconds = 0.5;
      r.run_seconds = 0.25;
      r.timestamp = 1.8e9;
      r.pass_context_hash = Hash64(10);
      r.max_error = 1e-6;
      r.instruments = {{"pass_names", {"vectorize"}}};
      r.host = "node-4";
      r.rank = 2;
      return r;
    };
    s["measure.MeasureResult"] = [result] {
      return obj(Ref<MeasureResult>(make_node<MeasureResult>(result())));
    };
    // The record node is private to record.cc: the graph of a written line.
    s["measure.Record"] = [task, result] {
      return load_string(record_to_line(Record{
          MeasureInput{task(), schedule::State::make({schedule::split(2, 1, {2})})}, result()}));
    };
  }
  {
    using namespace runtime;  // NOLINT: sample builders
    // A one-kernel plan: y = f(x, w), and y copied to a second output.
    auto buffer = [](BufferKind kind, int64_t bytes, std::vector<int64_t> shape) {
      auto b = make_node<PlanBufferNode>();
      b->kind = kind;
      b->bytes = bytes;
      b->dtype = DataType::float32();
      b->shape = std::move(shape);
      return b;
    };
    auto plan = [buffer] {
      auto p = make_node<ModelPlanNode>();
      p->target = "c";
      p->buffers.emplace_back(buffer(BufferKind::kInput, 16, {4}));
      auto w = buffer(BufferKind::kConstant, 16, {4});
      w->offset = 64;
      w->name = "w";
      p->buffers.emplace_back(w);
      auto packed = buffer(BufferKind::kPacked, 32, {});
      packed->source = 1;
      packed->packer = "k0_pack";
      p->buffers.emplace_back(packed);
      auto t = buffer(BufferKind::kArena, 16, {});
      t->offset = 0;
      p->buffers.emplace_back(t);
      p->buffers.emplace_back(buffer(BufferKind::kOutput, 16, {4}));
      p->buffers.emplace_back(buffer(BufferKind::kOutput, 16, {4}));
      auto tensor = [](std::string name, int64_t id) {
        auto n = make_node<PlanTensorNode>();
        n->name = std::move(name);
        n->shape = {4};
        n->dtype = DataType::float32();
        n->buffer = id;
        return PlanTensor(n);
      };
      p->inputs = {tensor("x", 0)};
      p->outputs = {tensor("y", 4), tensor("y_copy", 5)};
      auto fn = [](std::string name, std::vector<int64_t> bytes) {
        auto f = make_node<PlanFunctionNode>();
        f->name = std::move(name);
        f->arg_bytes = std::move(bytes);
        return PlanFunction(f);
      };
      p->functions = {fn("k0", {16, 32, 16}), fn("k0_pack", {16, 32}), fn("k1", {16, 16})};
      auto step = [](std::string function, std::vector<int64_t> args, int64_t from, int64_t to) {
        auto n = make_node<PlanStepNode>();
        n->function = std::move(function);
        n->args = std::move(args);
        n->copy_from = from;
        n->copy_to = to;
        return PlanStep(n);
      };
      p->steps = {step("k0", {0, 2, 3}, -1, -1), step("k1", {3, 4}, -1, -1), step("", {}, 4, 5)};
      p->arena_bytes = 64;
      p->weights_bytes = 80;
      p->report = {{"tasks", nlohmann::json::array()}};
      return ModelPlan(p);
    };
    s["runtime.ModelPlan"] = [plan] { return obj(plan()); };
    s["runtime.PlanBuffer"] = [plan] { return obj(plan()->buffers[2]); };
    s["runtime.PlanTensor"] = [plan] { return obj(plan()->outputs[1]); };
    s["runtime.PlanFunction"] = [plan] { return obj(plan()->functions[0]); };
    s["runtime.PlanStep"] = [plan] { return obj(plan()->steps[2]); };
    auto manifest = [] {
      auto m = make_node<ManifestNode>();
      for (const char* name : {"plan.json", "model.so", "weights.bin"}) {
        auto f = make_node<ManifestFileNode>();
        f->name = name;
        f->bytes = 3;
        f->sha256 = std::string(64, 'a');
        m->files.emplace_back(f);
      }
      return Manifest(m);
    };
    s["runtime.Manifest"] = [manifest] { return obj(manifest()); };
    s["runtime.ManifestFile"] = [manifest] { return obj(manifest()->files[1]); };
  }
  {
    using namespace search;
    s["search.AnnotateOptions"] = [] {
      auto o = make_node<AnnotateOptions>();
      o->auto_unroll_steps = {0, 32};
      o->max_innermost_reduction_split = 256;
      o->ragged_tile_prob = 0.25;
      return obj(Ref<AnnotateOptions>(o));
    };
    s["search.EvolutionaryOptions"] = [] {
      auto o = make_node<EvolutionaryOptions>();
      o->population = 64;
      o->eps_greedy = 0.5;
      o->annotate.tile_retries = 3;
      return obj(Ref<EvolutionaryOptions>(o));
    };
    s["search.TuneOptions"] = [] {
      auto o = make_node<TuneOptions>();
      o->trials = 10;
      o->log_path = "tune.log";
      o->pass_context = ir::PassContext::make(ir::PassContextOptions());
      o->weights = {1, 2.5};
      o->time_budget_s = 30;
      return obj(Ref<TuneOptions>(o));
    };
  }
  add_te_node_samples(s);
  add_graph_node_samples(s);
  return s;
}

}  // namespace

const std::map<std::string, std::function<ObjectPtr()>>& node_samples() {
  static const auto samples = build();
  return samples;
}

}  // namespace tensortune::testing
