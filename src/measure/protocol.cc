#include "tensortune/measure/protocol.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include "tensortune/codegen/c_codegen.h"
#include "tensortune/codegen/kernel_check.h"
#include "tensortune/codegen/module.h"
#include "tensortune/lower/lower.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/support/files.h"
#include "tensortune/support/hash.h"
#include "tensortune/te/evaluator.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tensortune::measure {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}



/// Error replies are dumped with invalid UTF-8 replaced: compiler output may quote anything.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_json(ErrorCode code, std::string_view message) {
  return {{"error_code", error_code_name(code)}, {"error_message", shorten_message(message)}};
}

template <class T>
T get_field(const json& doc, const char* key, std::string_view what) {
  auto it = doc.find(key);
  TT_CHECK(it != doc.end(), kParse, what, " has no \"", key, "\"");
  try {
    return it->get<T>();
  } catch (const json::exception& e) {
    fail(ErrorKind::kParse, what, ": \"", key, "\" has the wrong type: ", e.what());
  }
}

// ---------------------------------------------------------------------------
// Worker side: build

/// The reply for a build request.
json serve_build(const json& request) {
  auto task = load_json_as<te::Task>(request.at("task"));
  auto context = load_json_as<ir::PassContext>(request.at("pass_context"));
  std::vector<schedule::State> states;
  for (const auto& s : request.at("states")) states.push_back(load_json_as<schedule::State>(s));
  codegen::ModuleOptions module_options;
  module_options.cache_dir = request.value("cache_dir", std::string());
  // The pool enforces the build timeout by killing this worker's group; the
  // compiler stays in it so that it dies too.
  module_options.compiler_in_own_group = false;
  module_options.compile_timeout = std::chrono::hours(24);

  ir::PassContextGuard guard(context);
  schedule::ComputeDAG dag(te::workload_tensors(task->workload));
  std::vector<json> results(states.size());
  std::vector<lower::PrimFunc> funcs(states.size());
  std::vector<double> lower_seconds(states.size(), 0);
  for (size_t i = 0; i < states.size(); ++i) {
    auto start = Clock::now();
    std::optional<schedule::LoopState> loops;
    try {
      loops.emplace(schedule::replay(dag, states[i]));
    } catch (const Error& e) {
      results[i] = error_json(ErrorCode::kInstantiationError, e.what());
      continue;
    } catch (const std::exception& e) {
      results[i] = error_json(ErrorCode::kUnknownError, std::string("replaying the state: ") + e.what());
      continue;
    }
    try {
      funcs[i] = lower::lower(*loops, "candidate_" + std::to_string(i));
      codegen::generate_c({funcs[i]}, task->target);  // codegen errors belong to this candidate
    } catch (const Error& e) {
      results[i] = error_json(ErrorCode::kCompileError, e.what());
      funcs[i] = lower::PrimFunc();
    } catch (const std::exception& e) {
      results[i] = error_json(ErrorCode::kUnknownError, std::string("lowering: ") + e.what());
      funcs[i] = lower::PrimFunc();
    }
    lower_seconds[i] = seconds_since(start);
  }

  // One module for all candidates that lowered; on failure, one each.
  std::vector<size_t> pending;
  for (size_t i = 0; i < states.size(); ++i) {
    if (funcs[i]) pending.push_back(i);
  }
  auto finish = [&](size_t i, const codegen::Module& m, double compile_share) {
    results[i] = {{"error_code", "NO_ERROR"}, {"error_message", ""},
                  {"library", m.library_path()}, {"function", funcs[i]->name},
                  {"build_seconds", lower_seconds[i] + compile_share}};
  };
  bool batch_done = false;
  if (pending.size() > 1) {
    std::vector<lower::PrimFunc> batch;
    for (size_t i : pending) batch.push_back(funcs[i]);
    auto start = Clock::now();
    try {
      codegen::Module m = codegen::build_module(batch, task->target, module_options);
      double share = seconds_since(start) / static_cast<double>(pending.size());
      for (size_t i : pending) finish(i, m, share);
      batch_done = true;
    } catch (const Error&) {
      // Built one by one below, so that each error lands on its candidate.
    }
  }
  if (!batch_done) {
    for (size_t i : pending) {
      auto start = Clock::now();
      try {
        codegen::Module m = codegen::build_module({funcs[i]}, task->target, module_options);
        finish(i, m, seconds_since(start));
      } catch (const Error& e) {
        results[i] = error_json(ErrorCode::kCompileError, e.what());
        results[i]["build_seconds"] = lower_seconds[i] + seconds_since(start);
      }
    }
  }
  return {{"results", results},
          {"pass_context_hash", hash_to_hex(context.hash())},
          {"instruments", guard.instrument_results()}};
}

// ---------------------------------------------------------------------------
// Worker side: run

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

/// What a worker keeps between run requests: loaded libraries and reference
/// outputs, keyed by what they were made from.
struct RunCaches {
  std::map<std::string, codegen::Module> modules;  // by library path
  std::map<std::string, std::vector<te::NDArray>> inputs;      // by workload key + seed
  std::map<std::string, std::vector<te::NDArray>> references;  // by workload key + seed
};

RunCaches& run_caches() {
  static RunCaches caches;
  return caches;
}

/// The key of a workload's inputs and reference outputs: what they are made from.
std::string data_key(const te::Task& task, const RunnerOptions& options) {
  return te::workload_key(task->workload) + "/seed " + std::to_string(options.seed);
}

/// The inputs of every candidate of `task`, drawn once per worker.
const std::vector<te::NDArray>& pristine_inputs(const te::Task& task, const te::WorkloadTensors& tensors,
                                                const RunnerOptions& options) {
  auto& cache = run_caches().inputs;
  std::string key = data_key(task, options);
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() > 8) cache.clear();
    it = cache.emplace(key, te::random_inputs(tensors.inputs, options.seed)).first;
  }
  return it->second;
}

/// The reference outputs for the inputs of `task`: from this worker's memory,
/// else from the cache directory (written by an earlier worker), else
/// evaluated and written there. The file holds the outputs' bytes, one after
/// the other; one of another size is evaluated again.
const std::vector<te::NDArray>& reference(const te::Task& task, const te::WorkloadTensors& tensors,
                                          const RunnerOptions& options) {
  auto& cache = run_caches().references;
  std::string key = data_key(task, options);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() > 8) cache.clear();
  std::string dir = options.cache_dir.empty() ? codegen::default_cache_dir() : options.cache_dir;
  std::string path = dir + "/ref-" + hash_to_hex(hash_string("reference outputs v1 " + key)) + ".bin";
  std::vector<te::NDArray> outputs;
  size_t total = 0;
  for (const auto& t : tensors.outputs) {
    outputs.emplace_back(t.dtype(), t.shape());
    total += outputs.back().nbytes();
  }
  if (auto bytes = read_file_if_exists(path); bytes && bytes->size() == total) {
    size_t offset = 0;
    for (auto& o : outputs) {
      std::memcpy(o.data(), bytes->data() + offset, o.nbytes());
      offset += o.nbytes();
    }
  } else {
    outputs = codegen::reference_outputs(tensors, pristine_inputs(task, tensors, options));
    std::string data;
    data.reserve(total);
    for (const auto& o : outputs) data.append(static_cast<const char*>(o.data()), o.nbytes());
    std::error_code ignored;
    std::filesystem::create_directories(dir, ignored);
    try {
      write_file_atomically(path, data);
    } catch (const Error& e) {
      // Only a speed-up for later workers: go on without it.
      std::fprintf(stderr, "tensortune-worker: cannot keep reference outputs: %s\n", e.what());
    }
  }
  return cache.emplace(key, std::move(outputs)).first->second;
}

json serve_prepare(const json& request) {
  auto start = Clock::now();
  auto task = load_json_as<te::Task>(request.at("task"));
  RunnerOptions options = runner_options_from_json(request.at("options"));
  te::WorkloadTensors tensors = te::workload_tensors(task->workload);
  pristine_inputs(task, tensors, options);
  if (options.check) reference(task, tensors, options);
  return {{"error_code", "NO_ERROR"}, {"error_message", ""}, {"run_seconds", seconds_since(start)}};
}

json serve_run(const json& request) {
  auto total_start = Clock::now();
  auto task = load_json_as<te::Task>(request.at("task"));
  RunnerOptions options = runner_options_from_json(request.at("options"));
  std::string library = get_field<std::string>(request, "library", "run request");
  std::string function = get_field<std::string>(request, "function", "run request");

  auto& caches = run_caches();
  if (caches.modules.size() > 64) caches.modules.clear();  // libraries are small; this bounds the count
  codegen::KernelFn kernel = nullptr;
  try {
    auto it = caches.modules.find(library);
    if (it == caches.modules.end()) {
      it = caches.modules.emplace(library, codegen::Module::load(library)).first;
    }
    kernel = it->second.get(function);
  } catch (const Error& e) {
    return error_json(ErrorCode::kRuntimeError, std::string("cannot load the built kernel: ") + e.what());
  }

  te::WorkloadTensors tensors = te::workload_tensors(task->workload);
  // A copy: a bad candidate that writes its inputs cannot spoil later runs.
  std::vector<te::NDArray> inputs = pristine_inputs(task, tensors, options);
  json reply = {{"error_code", "NO_ERROR"}, {"error_message", ""}};
  if (options.check) {
    const std::vector<te::NDArray>& expected = reference(task, tensors, options);
    codegen::KernelCheck check = codegen::check_kernel(kernel, tensors, inputs, expected);
    reply["max_error"] = check.max_error;
    if (check.return_code != 0) {
      return error_json(ErrorCode::kRuntimeError,
                        "the kernel returned " + std::to_string(check.return_code));
    }
    if (!check.ok()) {
      json e = error_json(ErrorCode::kWrongAnswer, check.mismatch + " (max error " +
                                                       std::to_string(check.max_error) + ")");
      e["max_error"] = check.max_error;
      e["run_seconds"] = seconds_since(total_start);
      return e;
    }
  }

  std::vector<te::NDArray> outputs;
  for (const auto& t : tensors.outputs) outputs.emplace_back(t.dtype(), t.shape());
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
  auto call = [&] {
    int32_t rc = kernel(args.data());
    if (rc != 0) fail(ErrorKind::kRuntime, "the kernel returned ", rc);
  };
  try {
    // Warm-up (page faults, OpenMP thread start, lazy binding), unless the
    // check's call did it already.
    if (!options.check) call();
    int number = std::max(1, options.number);
    std::vector<double> costs;
    while (static_cast<int>(costs.size()) < std::max(1, options.repeat)) {
      if (options.flush_cache) {
        for (const auto& [data, bytes] : spans) flush_from_caches(data, bytes);
      }
      auto start = Clock::now();
      for (int n = 0; n < number; ++n) call();
      double elapsed = seconds_since(start);
      if (options.min_repeat_ms > 0 && elapsed * 1e3 < options.min_repeat_ms && number < (1 << 30)) {
        // Too short to time well: redo this measurement with enough calls.
        double scale = options.min_repeat_ms / std::max(elapsed * 1e3, 1e-3);
        number = static_cast<int>(std::min<double>(number * std::max(2.0, scale * 1.1), 1 << 30));
        continue;
      }
      costs.push_back(elapsed / number);
      if (options.cooldown_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(options.cooldown_ms));
      }
    }
    reply["costs"] = costs;
  } catch (const Error& e) {
    return error_json(ErrorCode::kRuntimeError, e.what());
  }
  reply["run_seconds"] = seconds_since(total_start);
  return reply;
}

}  // namespace

json runner_options_to_json(const RunnerOptions& o) {
  return {{"number", o.number},        {"repeat", o.repeat},           {"min_repeat_ms", o.min_repeat_ms},
          {"cooldown_ms", o.cooldown_ms}, {"flush_cache", o.flush_cache}, {"check", o.check},
          {"seed", o.seed},           {"cache_dir", o.cache_dir}};
}

RunnerOptions runner_options_from_json(const json& doc) {
  TT_CHECK(doc.is_object(), kParse, "runner options must be a JSON object");
  RunnerOptions o;
  const char* what = "runner options";
  for (const auto& [key, value] : doc.items()) {
    if (key == "number") o.number = get_field<int>(doc, "number", what);
    else if (key == "repeat") o.repeat = get_field<int>(doc, "repeat", what);
    else if (key == "min_repeat_ms") o.min_repeat_ms = get_field<int>(doc, "min_repeat_ms", what);
    else if (key == "cooldown_ms") o.cooldown_ms = get_field<int>(doc, "cooldown_ms", what);
    else if (key == "flush_cache") o.flush_cache = get_field<bool>(doc, "flush_cache", what);
    else if (key == "check") o.check = get_field<bool>(doc, "check", what);
    else if (key == "seed") o.seed = get_field<uint64_t>(doc, "seed", what);
    else if (key == "cache_dir") o.cache_dir = get_field<std::string>(doc, "cache_dir", what);
    else fail(ErrorKind::kParse, "unknown runner option \"", key, "\" (known: number, repeat, "
              "min_repeat_ms, cooldown_ms, flush_cache, check, seed, cache_dir)");
  }
  TT_CHECK(o.number >= 1 && o.repeat >= 1 && o.min_repeat_ms >= 0 && o.cooldown_ms >= 0,
           kInvalidArgument, "runner options: number and repeat must be >= 1, min_repeat_ms and "
           "cooldown_ms >= 0");
  return o;
}

std::string make_build_request(const te::Task& task, const std::vector<schedule::State>& states,
                               const ir::PassContext& context, const std::string& cache_dir) {
  json s = json::array();
  for (const auto& state : states) s.push_back(save_json(state));
  return dump({{"type", "build"}, {"task", save_json(task)}, {"states", s},
               {"pass_context", save_json(context)}, {"cache_dir", cache_dir}});
}

static std::vector<BuildResult> parse_build_reply_unchecked(std::string_view reply, size_t expected_count) {
  json doc = parse_json_text(reply, "build reply");
  if (doc.contains("error_code")) {  // the whole request failed
    BuildResult r;
    r.error_code = parse_error_code(get_field<std::string>(doc, "error_code", "build reply"));
    r.error_message = doc.value("error_message", "");
    return std::vector<BuildResult>(expected_count, r);
  }
  auto results = get_field<json>(doc, "results", "build reply");
  TT_CHECK(results.is_array() && results.size() == expected_count, kParse, "build reply has ",
           results.size(), " results for ", expected_count, " candidates");
  uint64_t hash = hash_from_hex(get_field<std::string>(doc, "pass_context_hash", "build reply"),
                                "the build reply's pass_context_hash");
  json instruments = doc.value("instruments", json::object());
  std::vector<BuildResult> out;
  for (const auto& r : results) {
    BuildResult b;
    b.error_code = parse_error_code(get_field<std::string>(r, "error_code", "build result"));
    b.error_message = r.value("error_message", "");
    b.library = r.value("library", "");
    b.function = r.value("function", "");
    b.build_seconds = r.value("build_seconds", 0.0);
    b.pass_context_hash = hash;
    b.instruments = instruments;
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<BuildResult> parse_build_reply(std::string_view reply, size_t expected_count) {
  try {
    return parse_build_reply_unchecked(reply, expected_count);
  } catch (const json::exception& e) {
    fail(ErrorKind::kParse, "malformed build reply: ", e.what());
  }
}

std::string make_run_request(const te::Task& task, const BuildResult& built,
                             const RunnerOptions& options) {
  return dump({{"type", "run"}, {"task", save_json(task)}, {"library", built.library},
               {"function", built.function}, {"options", runner_options_to_json(options)}});
}

std::string make_prepare_request(const te::Task& task, const RunnerOptions& options) {
  return dump({{"type", "prepare"}, {"task", save_json(task)}, {"options", runner_options_to_json(options)}});
}

static RunOutcome parse_run_reply_unchecked(std::string_view reply, bool expect_costs) {
  json doc = parse_json_text(reply, "run reply");
  RunOutcome r;
  r.error_code = parse_error_code(get_field<std::string>(doc, "error_code", "run reply"));
  r.error_message = doc.value("error_message", "");
  if (doc.contains("costs")) r.costs = doc.at("costs").get<std::vector<double>>();
  r.run_seconds = doc.value("run_seconds", 0.0);
  if (doc.contains("max_error") && doc.at("max_error").is_number()) {
    r.max_error = doc.at("max_error").get<double>();
  }
  TT_CHECK(!expect_costs || !r.costs.empty() || r.error_code != ErrorCode::kNoError, kParse,
           "run reply says NO_ERROR but has no costs");
  return r;
}

RunOutcome parse_run_reply(std::string_view reply, bool expect_costs) {
  try {
    return parse_run_reply_unchecked(reply, expect_costs);
  } catch (const json::exception& e) {
    fail(ErrorKind::kParse, "malformed run reply: ", e.what());
  }
}

std::string serve_request(std::string_view request) {
  try {
    json doc = parse_json_text(request, "request");
    std::string type = get_field<std::string>(doc, "type", "request");
    if (type == "build") return dump(serve_build(doc));
    if (type == "run") {
      try {
        return dump(serve_run(doc));
      } catch (const std::bad_alloc&) {
        // The worker's address-space limit: the candidate's buffers do not fit.
        return dump(error_json(ErrorCode::kRuntimeError,
                               "out of memory (the worker's memory limit) allocating the kernel's buffers"));
      }
    }
    if (type == "prepare") return dump(serve_prepare(doc));
    fail(ErrorKind::kParse, "unknown request type \"", type, "\" (known: build, run, prepare)");
  } catch (const Error& e) {
    return dump(error_json(ErrorCode::kUnknownError, e.what()));
  } catch (const std::exception& e) {
    return dump(error_json(ErrorCode::kUnknownError, std::string("unexpected exception: ") + e.what()));
  }
}

}  // namespace tensortune::measure
