#include "tensortune/measure/worker_service.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <new>
#include <thread>

#include "tensortune/codegen/backend.h"
#include "tensortune/codegen/build.h"
#include "tensortune/codegen/kernel_check.h"
#include "tensortune/lower/lower.h"
#include "tensortune/measure/model_timing.h"
#include "tensortune/measure/protocol.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/support/build_info.h"
#include "tensortune/support/files.h"
#include "tensortune/support/hash.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/evaluator.h"
#include "tensortune/te/workload.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tensortune::measure {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

RunOutcome failed_run(ErrorCode code, std::string_view message) {
  RunOutcome r;
  r.error_code = code;
  r.error_message = shorten_message(message);
  return r;
}

/// The worker's copy of a task's workload must be the program the tuner
/// means: a worker whose registry builds another DAG from the same key (an
/// older or newer definition) would time something else.
void check_workload_hash(const te::Task& task, const Hash64& expected) {
  Hash64 mine(te::workload_dag_hash(task->workload));
  TT_CHECK(mine == expected, kInvalidArgument, "this worker's workload ", task.workload_key(),
           " has DAG hash ", mine.str(), ", the tuner's ", expected.str(),
           ": the two programs were built from different definitions of it; use a "
           "tensortune-worker built from the same sources as the tuner");
}

// ---------------------------------------------------------------------------
// Hello and check

WorkerInfo serve_hello(const HelloRequest&) {
  WorkerInfo info;
  info.protocol_version = kProtocolVersion;
  info.build_id = std::string(build_id());
  info.pid = ::getpid();
  return info;
}

CheckReply serve_check(const CheckRequest& request) {
  CheckReply reply;
  // What could not be loaded at all (an unknown workload, instrument, option
  // or target kind) never gets here: loading the request failed, naming it.
  Hash64 mine(te::workload_dag_hash(request.task->workload));
  if (!(mine == request.workload_hash)) {
    reply.problems.push_back(tensortune::detail::concat(
        "workload ", request.task.workload_key(), " has DAG hash ", mine.str(), " here and ",
        request.workload_hash.str(),
        " in the tuner: they were built from different definitions of it"));
  }
  const std::string& kind = request.task->target->kind;
  if (request.build && !codegen::has_backend(kind)) {
    reply.problems.push_back(tensortune::detail::concat(
        "no code generator for target kind '", kind,
        "' (this worker generates code for: ", join(codegen::backend_kinds(), ", "), ")"));
  }
  return reply;
}

// ---------------------------------------------------------------------------
// Build

/// The error code of a state that did not build: the stage it failed at.
ErrorCode code_of(const codegen::StateBuild& b) {
  return b.stage == codegen::BuildStage::kReplay ? ErrorCode::kInstantiationError
                                                 : ErrorCode::kCompileError;
}

/// A simulated build (BuildRequest::simulate): each state replayed and
/// lowered as a real build does, with its program's hash in place of a kernel.
BuildReply simulated_build(const BuildRequest& request) {
  const te::Task& task = request.task;
  schedule::ComputeDAG dag(te::workload_tensors(task->workload));
  BuildReply reply;
  reply.task_hash = Hash64(structural_hash(task));
  reply.task_nodes = static_cast<int64_t>(post_order(ObjectPtr(task.ptr())).size());
  for (const schedule::State& state : request.states) {
    auto start = Clock::now();
    auto result = make_node<BuildResult>();
    result->pass_context_hash = Hash64(request.pass_context.hash());
    // The stage that fails names the error, as in a real build (code_of).
    ErrorCode stage = ErrorCode::kInstantiationError;
    try {
      schedule::LoopState loops = schedule::replay(dag, state);
      stage = ErrorCode::kCompileError;
      ir::PassContextGuard guard(request.pass_context);
      result->program_hash = Hash64(structural_hash(lower::lower(loops, "kernel")));
      result->instruments = guard.instrument_results();
    } catch (const UserError& e) {
      result->error_code = stage;
      result->error_message = shorten_message(e.what());
    }
    result->build_seconds = seconds_since(start);
    reply.results.push_back(Ref<BuildResult>(std::move(result)));
  }
  return reply;
}

BuildReply serve_build(const BuildRequest& request) {
  const te::Task& task = request.task;
  check_workload_hash(task, request.workload_hash);
  if (request.simulate) return simulated_build(request);
  codegen::ModuleOptions module_options;
  module_options.cache_dir = request.cache_dir;
  // The pool enforces the build timeout by killing this worker's group; the
  // compiler stays in it so that it dies too.
  module_options.compiler_in_own_group = false;
  module_options.compile_timeout = std::chrono::hours(24);

  schedule::ComputeDAG dag(te::workload_tensors(task->workload));
  std::vector<codegen::StateBuild> builds = codegen::build_states(
      dag, request.states, task->target, request.pass_context, module_options, "candidate_");
  BuildReply reply;
  reply.task_hash = Hash64(structural_hash(task));
  reply.task_nodes = static_cast<int64_t>(post_order(ObjectPtr(task.ptr())).size());
  Hash64 context_hash(request.pass_context.hash());
  for (auto& b : builds) {
    auto result = make_node<BuildResult>();
    result->build_seconds = b.seconds;
    result->pass_context_hash = context_hash;
    result->instruments = std::move(b.instruments);
    if (b.ok()) {
      result->library = b.module.library_path();
      result->library_sha256 = b.module.sha256();
      result->function = b.function;
      for (const auto& p : b.packers) {
        result->packed_inputs.push_back(p.input);
        result->packers.push_back(p.function);
        result->packed_elements.push_back(p.elements);
      }
    } else {
      result->error_code = code_of(b);
      result->error_message = shorten_message(b.error);
    }
    reply.results.push_back(Ref<BuildResult>(std::move(result)));
  }
  return reply;
}

// ---------------------------------------------------------------------------
// Run

/// Evicts `bytes` at `data` from every cache level.
void flush_from_caches(const void* data, size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
  const char* p = static_cast<const char*>(data);
  for (size_t off = 0; off < bytes; off += 64) _mm_clflush(p + off);
  _mm_mfence();
#else
  // No cache-line flush instruction here: overwrite the caches instead.
  static std::vector<char> scratch(size_t{256} << 20);
  for (size_t i = 0; i < scratch.size(); i += 64) scratch[i] += 1;
  (void)data;
  (void)bytes;
#endif
}

/// An activation input and the values it must hold.
struct Activation {
  char* data;
  const char* values;
  size_t bytes;
};

/// The module's tt_write_shares, which codegen's C back end emits beside the
/// kernels: a copy on the kernels' own threads, each a contiguous
/// share of whole cache lines (the caller takes the share of a worker that
/// has not started), as a parallel producer kernel leaves its output:
/// modified, split across the cores that run the consumer.
using WriteShares = void (*)(char* dst, const char* src, int64_t bytes);
WriteShares write_shares_of(const codegen::Module& module) {
  return reinterpret_cast<WriteShares>(reinterpret_cast<void*>(module.get("tt_write_shares")));
}

/// What a worker keeps between run requests: loaded libraries, inputs and
/// reference outputs, keyed by what they were made from.
struct RunCaches {
  std::map<std::string, codegen::Module> modules;              // by library path
  std::map<std::string, std::vector<te::NDArray>> inputs;      // by data_key
  std::map<std::string, std::vector<te::NDArray>> references;  // by data_key
};

RunCaches& run_caches() {
  static RunCaches caches;
  return caches;
}

/// The key of a task's inputs and reference outputs: what they are made
/// from, the program (its DAG hash, which changes with its definition) and
/// the seed.
std::string data_key(const Hash64& workload_hash, const RunnerOptions& options) {
  return workload_hash.str() + "-seed-" + std::to_string(options.seed);
}

/// The inputs of every candidate of a task, drawn once per worker.
const std::vector<te::NDArray>& pristine_inputs(const std::string& key,
                                                const te::WorkloadTensors& tensors,
                                                const RunnerOptions& options) {
  auto& cache = run_caches().inputs;
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() > 8) cache.clear();
    it = cache.emplace(key, te::random_inputs(tensors.inputs, options.seed)).first;
  }
  return it->second;
}

/// The reference outputs for the inputs of a task: from this worker's
/// memory, else from the cache directory (written by an earlier worker), else
/// evaluated and written there. The file holds the outputs' bytes, one after
/// the other; one of another size is evaluated again.
const std::vector<te::NDArray>& reference(const std::string& key,
                                          const te::WorkloadTensors& tensors,
                                          const RunnerOptions& options) {
  auto& cache = run_caches().references;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() > 8) cache.clear();
  std::string dir = options.cache_dir.empty() ? codegen::default_cache_dir() : options.cache_dir;
  std::string path = dir + "/ref-" + key + ".bin";
  std::vector<te::NDArray> outputs;
  size_t total = 0;
  for (const auto& t : tensors.outputs) {
    outputs.emplace_back(t.dtype(), t.shape());
    total += outputs.back().nbytes();
  }
  // Read and written only in a directory private to the user, and taken
  // only when it matches the hash written with it: --check compares with it.
  bool private_dir = true;
  try {
    ensure_private_dir(dir, "the module cache");
  } catch (const UserError& e) {
    std::fprintf(stderr, "tensortune-worker: reference outputs not cached: %s\n", e.what());
    private_dir = false;
  }
  std::optional<std::string> bytes;
  if (private_dir) bytes = read_cache_entry(path);
  if (bytes && bytes->size() == total) {
    size_t offset = 0;
    for (auto& o : outputs) {
      std::memcpy(o.data(), bytes->data() + offset, o.nbytes());
      offset += o.nbytes();
    }
  } else {
    outputs = codegen::reference_outputs(tensors, pristine_inputs(key, tensors, options));
    std::string data;
    data.reserve(total);
    for (const auto& o : outputs) data.append(static_cast<const char*>(o.data()), o.nbytes());
    try {
      if (private_dir) write_cache_entry(path, data);
    } catch (const UserError& e) {
      // Only a speed-up for later workers: go on without it.
      std::fprintf(stderr, "tensortune-worker: cannot keep reference outputs: %s\n", e.what());
    }
  }
  return cache.emplace(key, std::move(outputs)).first->second;
}

/// This process's mapped address space, in bytes.
uint64_t mapped_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

/// While it lives, caps this process's address space (RLIMIT_AS) at what is
/// mapped now plus `need`, never above the hard limit the worker was started
/// with (--memory-limit-bytes): a candidate that allocates without end then
/// fails at once, whatever the machine, instead of touching gigabytes until
/// its run times out. The old limit is restored at the end.
class AddressSpaceCap {
 public:
  explicit AddressSpaceCap(uint64_t need) {
    if (kAddressSanitizer || ::getrlimit(RLIMIT_AS, &old_) != 0) return;
    uint64_t cap = mapped_bytes() + need;
    if (old_.rlim_max != RLIM_INFINITY) cap = std::min<uint64_t>(cap, old_.rlim_max);
    struct rlimit limit = old_;
    limit.rlim_cur = cap;
    active_ = ::setrlimit(RLIMIT_AS, &limit) == 0;
  }
  ~AddressSpaceCap() {
    if (active_) ::setrlimit(RLIMIT_AS, &old_);
  }
  AddressSpaceCap(const AddressSpaceCap&) = delete;
  AddressSpaceCap& operator=(const AddressSpaceCap&) = delete;

 private:
  struct rlimit old_ {};
  bool active_ = false;
};

/// What a candidate of `tensors` may legitimately map beyond what the worker
/// holds already: every tensor of its DAG twice over (intermediate and cache
/// stages are no larger), the stacks and malloc arenas of its threads, and
/// slack for the runtime. A schedule that wants more scratch (an rfactor
/// splitting a long reduction of a wide output into hundreds of partial
/// outputs) fails with the kernel's out-of-memory message.
uint64_t candidate_need(const te::WorkloadTensors& tensors, int64_t threads) {
  uint64_t bytes = 0;
  for (const te::Tensor& t : te::post_order_tensors(tensors.outputs)) {
    uint64_t n = static_cast<uint64_t>(t.dtype().bytes());
    for (int64_t d : t.shape()) n *= static_cast<uint64_t>(std::max<int64_t>(d, 1));
    bytes += n;
  }
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  return 2 * bytes + 256 * kMiB + static_cast<uint64_t>(std::max<int64_t>(threads, 1)) * 96 * kMiB;
}

RunOutcome serve_prepare(const PrepareRequest& request) {
  auto start = Clock::now();
  check_workload_hash(request.task, request.workload_hash);
  const RunnerOptions& options = *request.options;
  RunOutcome r;
  if (options.simulate_ms >= 0) return r;  // nothing is run, so nothing is needed
  te::WorkloadTensors tensors = te::workload_tensors(request.task->workload);
  std::string key = data_key(request.workload_hash, options);
  pristine_inputs(key, tensors, options);
  if (options.check) reference(key, tensors, options);
  r.run_seconds = seconds_since(start);
  return r;
}

RunOutcome serve_run(const RunRequest& request) {
  auto total_start = Clock::now();
  const te::Task& task = request.task;
  check_workload_hash(task, request.workload_hash);
  const RunnerOptions& options = *request.options;
  if (options.simulate_ms >= 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(options.simulate_ms));
    RunOutcome r;
    r.costs.assign(static_cast<size_t>(options.repeat), simulated_cost(request.program_hash));
    r.run_seconds = seconds_since(total_start);
    return r;
  }

  auto& caches = run_caches();
  if (caches.modules.size() > 64)
    caches.modules.clear();  // libraries are small; this bounds the count
  codegen::KernelFn kernel = nullptr;
  try {
    auto it = caches.modules.find(request.library);
    if (it == caches.modules.end()) {
      it = caches.modules
               .emplace(request.library,
                        codegen::Module::load_checked(request.library, request.library_sha256))
               .first;
    }
    kernel = it->second.get(request.function);
  } catch (const UserError& e) {
    return failed_run(ErrorCode::kRuntimeError,
                      std::string("cannot load the built kernel: ") + e.what());
  }

  te::WorkloadTensors tensors = te::workload_tensors(task->workload);
  std::string key = data_key(request.workload_hash, options);
  // A copy: a bad candidate that writes its inputs cannot spoil later runs.
  // Layout-rewritten inputs are packed, as a compiled model does once at
  // load time: not part of the kernel's time.
  std::vector<te::NDArray> inputs;
  try {
    std::vector<codegen::PackerInfo> packers;
    for (size_t p = 0; p < request.packers.size(); ++p) {
      packers.push_back({static_cast<int>(request.packed_inputs[p]), request.packers[p],
                         request.packed_elements[p]});
    }
    inputs = codegen::pack_inputs(caches.modules.at(request.library), packers,
                                  pristine_inputs(key, tensors, options));
  } catch (const UserError& e) {
    return failed_run(ErrorCode::kRuntimeError,
                      std::string("cannot pack the kernel's rewritten inputs: ") + e.what());
  }
  const std::vector<te::NDArray>* expected = nullptr;
  if (options.check) expected = &reference(key, tensors, options);
  std::vector<te::NDArray> outputs;
  for (const auto& t : tensors.outputs) outputs.emplace_back(t.dtype(), t.shape());

  // The check's call finds the activations as every timed call does. Only
  // constant inputs are packed before the call, so an activation's values
  // are its pristine input as they are.
  std::vector<Activation> activations;
  WriteShares write_shares = nullptr;
  if (options.fresh_activations) {
    const std::vector<te::NDArray>& values = pristine_inputs(key, tensors, options);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (std::find(tensors.constant_inputs.begin(), tensors.constant_inputs.end(),
                    static_cast<int>(i)) != tensors.constant_inputs.end()) {
        continue;
      }
      TT_ICHECK(inputs[i].nbytes() == values.at(i).nbytes(), "activation ", i, " holds ",
                inputs[i].nbytes(), " bytes, its values ", values.at(i).nbytes());
      activations.push_back({static_cast<char*>(inputs[i].data()),
                             static_cast<const char*>(values.at(i).data()), inputs[i].nbytes()});
    }
    try {
      write_shares = write_shares_of(caches.modules.at(request.library));
    } catch (const UserError& e) {
      return failed_run(ErrorCode::kRuntimeError,
                        std::string("cannot write the kernel's activations: ") + e.what());
    }
  }
  auto write_activations = [&] {
    for (const Activation& a : activations) {
      write_shares(a.data, a.values, static_cast<int64_t>(a.bytes));
    }
  };
  write_activations();

  // From here on only the candidate allocates.
  AddressSpaceCap cap(candidate_need(tensors, task->hardware_params->num_cores));
  RunOutcome reply;
  if (expected) {
    codegen::KernelCheck check = codegen::check_kernel(kernel, tensors, inputs, *expected);
    reply.max_error = check.max_error;
    if (check.return_code != 0) {
      return failed_run(ErrorCode::kRuntimeError,
                        "the kernel returned " + std::to_string(check.return_code));
    }
    if (!check.ok()) {
      RunOutcome e = failed_run(ErrorCode::kWrongAnswer, check.mismatch + " (max error " +
                                                             std::to_string(check.max_error) + ")");
      e.max_error = check.max_error;
      e.run_seconds = seconds_since(total_start);
      return e;
    }
  }

  std::vector<void*> args;
  std::vector<std::pair<const void*, size_t>> spans;
  for (auto& a : inputs) {
    args.push_back(a.data());
    spans.emplace_back(a.data(), a.nbytes());
  }
  for (auto& a : outputs) {
    args.push_back(a.data());
    spans.emplace_back(a.data(), a.nbytes());
  }
  std::vector<std::pair<const void*, size_t>> weights;
  if (options.flush_weights) {
    for (int c : tensors.constant_inputs) {
      const te::NDArray& w = inputs.at(static_cast<size_t>(c));
      weights.emplace_back(w.data(), w.nbytes());
    }
  }
  auto call = [&] {
    int32_t rc = kernel(args.data());
    if (rc != 0) fail(ErrorKind::kRuntime, "the kernel returned ", rc);
  };
  // Seconds in `n` calls; with flush_weights each call finds the weights
  // evicted, with fresh_activations its activations just written, and
  // neither is timed.
  auto timed_calls = [&](int n) {
    if (weights.empty() && activations.empty()) {
      auto start = Clock::now();
      for (int k = 0; k < n; ++k) call();
      return seconds_since(start);
    }
    double seconds = 0;
    for (int k = 0; k < n; ++k) {
      for (const auto& [data, bytes] : weights) flush_from_caches(data, bytes);
      write_activations();
      auto start = Clock::now();
      call();
      seconds += seconds_since(start);
    }
    return seconds;
  };
  try {
    // Warm-up (page faults, thread start, lazy binding), unless the
    // check's call did it already. Its time says how many calls a
    // measurement needs to last min_repeat_ms. A candidate whose warm-up
    // took twice the time to abandon at, and long enough that starting
    // threads and touching fresh memory cannot explain it, is measured by it.
    const double abandon = request.abandon_above_s;
    constexpr double kWarmUpCanDecideAbove = 0.05;
    int number = std::max(1, options.number);
    if (!options.check) {
      double warm = timed_calls(1);
      reply.kernel_seconds += warm;
      if (abandon > 0 && warm > 2 * abandon && warm > kWarmUpCanDecideAbove) {
        reply.costs = {warm};
        reply.run_seconds = seconds_since(total_start);
        return reply;
      }
      if (options.min_repeat_ms > 0 && warm > 0) {
        double calls = std::ceil(options.min_repeat_ms * 1e-3 / warm);
        number = static_cast<int>(std::clamp<double>(calls, number, 1 << 30));
      }
    }
    std::vector<double> costs;
    costs.reserve(static_cast<size_t>(std::max(1, options.repeat)));
    while (static_cast<int>(costs.size()) < std::max(1, options.repeat)) {
      if (options.flush_cache) {
        for (const auto& [data, bytes] : spans) flush_from_caches(data, bytes);
      }
      double elapsed = timed_calls(number);
      reply.kernel_seconds += elapsed;
      if (options.min_repeat_ms > 0 && elapsed * 1e3 < options.min_repeat_ms &&
          number < (1 << 30)) {
        // Too short to time well: redo this measurement with enough calls.
        double scale = options.min_repeat_ms / std::max(elapsed * 1e3, 1e-3);
        number = static_cast<int>(std::min<double>(number * std::max(2.0, scale * 1.1), 1 << 30));
        continue;
      }
      costs.push_back(elapsed / number);
      if (abandon > 0 && costs.size() == 1 && costs[0] > abandon) break;
      if (options.cooldown_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(options.cooldown_ms));
      }
    }
    reply.costs = std::move(costs);
  } catch (const UserError& e) {
    return failed_run(ErrorCode::kRuntimeError, e.what());
  }
  reply.run_seconds = seconds_since(total_start);
  return reply;
}

std::string request_error(ErrorKind kind, std::string_view message) {
  RequestError e;
  e.kind = std::string(error_kind_name(kind));
  e.message = shorten_message(message);
  return encode(e);
}

/// A build that ran out of the worker's memory: every candidate of the
/// request failed to compile, for that reason (not the tuner's fault).
BuildReply out_of_memory_build(const BuildRequest& request) {
  BuildReply reply;
  reply.task_hash = Hash64(structural_hash(request.task));
  reply.task_nodes = static_cast<int64_t>(post_order(ObjectPtr(request.task.ptr())).size());
  for (size_t i = 0; i < request.states.size(); ++i) {
    auto result = make_node<BuildResult>();
    result->error_code = ErrorCode::kCompileError;
    result->error_message =
        "out of memory (the worker's memory limit) while lowering or compiling the candidates";
    result->pass_context_hash = Hash64(request.pass_context.hash());
    reply.results.emplace_back(std::move(result));
  }
  return reply;
}

std::string serve(const ObjectPtr& request) {
  if (auto r = std::dynamic_pointer_cast<const BuildRequest>(request)) {
    try {
      return encode(serve_build(*r));
    } catch (const std::bad_alloc&) {
      return encode(out_of_memory_build(*r));
    }
  }
  if (auto r = std::dynamic_pointer_cast<const RunRequest>(request)) {
    try {
      return encode(serve_run(*r));
    } catch (const std::bad_alloc&) {
      // The address-space cap: the candidate's buffers do not fit.
      return encode(failed_run(ErrorCode::kRuntimeError,
                               "out of memory (the worker's memory limit) allocating the kernel's "
                               "buffers"));
    }
  }
  if (auto r = std::dynamic_pointer_cast<const PrepareRequest>(request)) {
    return encode(serve_prepare(*r));
  }
  if (auto r = std::dynamic_pointer_cast<const ModelTimingRequest>(request)) {
    try {
      return encode(time_candidates_in_model(*r));
    } catch (const std::bad_alloc&) {
      fail(ErrorKind::kRuntime, "out of memory (the worker's memory limit) loading or running ",
           r->model_dir);
    }
  }
  if (auto r = std::dynamic_pointer_cast<const CheckRequest>(request))
    return encode(serve_check(*r));
  if (auto r = std::dynamic_pointer_cast<const HelloRequest>(request))
    return encode(serve_hello(*r));
  fail(ErrorKind::kInvalidArgument, "a ", request ? request->type_key() : "null graph",
       " is not a request (requests: measure.HelloRequest, measure.CheckRequest, "
       "measure.BuildRequest, measure.RunRequest, measure.PrepareRequest, "
       "measure.ModelTimingRequest)");
}

/// The parent-death signal's handler: kills the whole process group, the
/// compiler this worker may be running included, then (SIGKILL) itself.
extern "C" void kill_own_group(int) {
  if (::getpgrp() == ::getpid()) ::kill(0, SIGKILL);
  ::_exit(1);
}

}  // namespace

std::string serve_request(std::string_view text) {
  try {
    return serve(load_string(text));
  } catch (const Error& e) {
    return request_error(e.kind(), e.what());
  } catch (const std::exception& e) {
    return request_error(ErrorKind::kInternal, std::string("unexpected exception: ") + e.what());
  }
}

void die_with_parent(int parent) {
  // SIGKILL would end this worker alone: a compiler it started would go on
  // for seconds after the tuner is gone. A handled signal ends the group.
  struct sigaction action {};
  action.sa_handler = kill_own_group;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) std::perror("tensortune-worker: prctl");
  // The parent may have died before prctl: then we were re-parented already.
  if (::getppid() != parent) kill_own_group(SIGTERM);
}

}  // namespace tensortune::measure
