// Whole models on the command line: `tasks` lists what a model's tuning is
// made of, `compile` builds it with a log's best schedules (defaults for the
// rest) and `run` runs what compile wrote. `tune MODEL.onnx` is in
// tune_cmd.cc, on top of load_model() here.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>

#include "cli_common.h"
#include "tensortune/frontend/onnx.h"
#include "tensortune/graph/compile.h"
#include "tensortune/graph/partition.h"
#include "tensortune/ir/target.h"
#include "tensortune/object/serialize.h"
#include "tensortune/support/files.h"
#include "tensortune/support/shape.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/npy.h"

namespace tensortune::cli {

using json = nlohmann::json;

std::map<std::string, std::vector<int64_t>> parse_input_shapes(
    const std::vector<std::string>& specs) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& spec : specs) {
    size_t eq = spec.rfind('=');
    TT_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < spec.size(), kInvalidArgument,
             "--input-shape '", spec, "' must be NAME=DIMS, e.g. input=1,3,224,224");
    std::vector<int64_t> dims;
    for (const std::string& part : split(spec.substr(eq + 1), ',')) {
      long long d = 0;
      TT_CHECK(parse_int(trim(part), &d) && d >= 1, kInvalidArgument, "--input-shape '", spec,
               "': '", part, "' is not a dimension (an integer >= 1)");
      dims.push_back(d);
    }
    TT_CHECK(shapes.emplace(spec.substr(0, eq), dims).second, kInvalidArgument,
             "--input-shape names '", spec.substr(0, eq), "' twice; give each input once");
  }
  return shapes;
}

graph::Graph load_model(const std::string& path, const std::vector<std::string>& input_shapes,
                        const std::vector<std::string>& input_values) {
  frontend::OnnxImportOptions options;
  options.input_shapes = parse_input_shapes(input_shapes);
  for (const std::string& spec : input_values) {
    size_t eq = spec.find('=');
    TT_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < spec.size(), kInvalidArgument,
             "--input-value '", spec, "' must be NAME=FILE (a .npy or ONNX TensorProto .pb file)");
    TT_CHECK(
        options.input_values.emplace(spec.substr(0, eq), read_input(spec.substr(eq + 1))).second,
        kInvalidArgument, "--input-value names '", spec.substr(0, eq),
        "' twice; give each input once");
  }
  return frontend::import_onnx(path, options);
}

te::NDArray read_input(const std::string& path) {
  std::string bytes = read_file(path);
  if (bytes.rfind("\x93NUMPY", 0) == 0) return te::parse_npy(bytes, path);
  return frontend::read_tensor_proto(path);
}

namespace {

std::string mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

/// The ONNX model and target of `tasks` and `compile`.
struct ModelArgs {
  std::string model, target = "native";
  std::vector<std::string> input_shapes, input_values;

  void add_to(CLI::App* cmd) {
    cmd->add_option("model", model, "the model (.onnx)")->required();
    cmd->add_option(
        "--target", target,
        "target string (default native: this CPU), e.g. \"c -mattr=avx2,fma -num-cores=2\"");
    cmd->add_option("--input-shape", input_shapes,
                    "NAME=DIMS for an input whose shape the model leaves open; repeatable");
    cmd->add_option("--input-value", input_values,
                    "NAME=FILE: fix an input to the value in a .npy or .pb file, as a constant "
                    "the model no longer takes (a shape or axes given as an input); repeatable");
  }
  /// The model. With `as_json`, one that uses what is not supported also
  /// prints {"model", "error", "unsupported": [every gap]} before failing.
  graph::Graph load(bool as_json) const {
    try {
      return load_model(model, input_shapes, input_values);
    } catch (const frontend::OnnxUnsupportedError& e) {
      if (as_json) {
        json gaps = json::array();
        for (const frontend::OnnxGap& g : e.gaps()) gaps.push_back(g.to_json());
        json out = {{"model", model}, {"error", e.what()}, {"unsupported", gaps}};
        std::cout << out.dump(1) << "\n";
      }
      throw;
    }
  }
};

// ---- tasks ------------------------------------------------------------------

struct TasksArgs {
  ModelArgs source;
  bool as_json = false;
  PassContextArgs pass_context;
};

int run_tasks(const TasksArgs& args) {
  auto start = std::chrono::steady_clock::now();
  graph::Graph model = args.source.load(args.as_json);
  ir::PassContextGuard guard(args.pass_context.make());
  graph::Partition partition = graph::partition_model(model, ir::Target::parse(args.source.target));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!partition.fallback_reason.empty()) {
    std::fprintf(stderr,
                 "warning: the graph passes failed (%s); these are the tasks of the graph as "
                 "imported\n",
                 partition.fallback_reason.c_str());
  }
  double total_flops = 0;
  int64_t kernels = 0;
  json list = json::array();
  for (const auto& t : partition.tasks) {
    te::WorkloadTensors tensors = te::workload_tensors(t.task->workload);
    std::vector<std::vector<int64_t>> in_shapes;
    for (const auto& in : tensors.inputs) in_shapes.push_back(in.shape());
    total_flops += t.flops * static_cast<double>(t.occurrences);
    kernels += t.occurrences;
    list.push_back({{"workload_key", t.workload_key},
                    {"operators", t.description},
                    {"weight", t.occurrences},
                    {"flops", t.flops},
                    {"input_shapes", in_shapes},
                    {"constant_inputs", tensors.constant_inputs},
                    {"output_shape", tensors.outputs.back().shape()},
                    {"task", save_json(t.task)}});
  }
  if (args.as_json) {
    json out = {{"model", args.source.model},
                {"target", ir::Target::parse(args.source.target).str()},
                {"tasks", list},
                {"kernels", kernels},
                {"flops", total_flops},
                {"seconds", seconds}};
    if (!partition.fallback_reason.empty()) out["fallback_reason"] = partition.fallback_reason;
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  std::printf("%-3s %6s %10s  %-22s %-40s %s\n", "#", "weight", "MFLOP", "output", "operators",
              "workload key");
  for (size_t i = 0; i < partition.tasks.size(); ++i) {
    const auto& t = partition.tasks[i];
    std::string ops =
        t.description.size() > 40 ? t.description.substr(0, 37) + "..." : t.description;
    std::printf("%-3zu %6lld %10.2f  %-22s %-40s %s\n", i, static_cast<long long>(t.occurrences),
                t.flops / 1e6,
                shape_text(list[i]["output_shape"].get<std::vector<int64_t>>()).c_str(),
                ops.c_str(), t.workload_key.c_str());
  }
  std::printf("%zu tasks, %lld kernel calls, %.3f GFLOP per run; extracted in %.2f s\n",
              partition.tasks.size(), static_cast<long long>(kernels), total_flops / 1e9, seconds);
  return 0;
}

// ---- compile ----------------------------------------------------------------

struct CompileArgs {
  ModelArgs source;
  std::string log_path, output;
  bool fail_on_default = false, any_pass_context = false, as_json = false;
  measure::ModelTimingOptions in_model;
  PassContextArgs pass_context;
  NodeOptions options;  ///< the --in-model-* flags generated from in_model
};

int run_compile(const CompileArgs& args) {
  graph::Graph model = args.source.load(args.as_json);
  graph::CompileOptions options;
  options.target = ir::Target::parse(args.source.target);
  options.fail_on_default = args.fail_on_default;
  options.any_pass_context = args.any_pass_context;
  options.in_model = args.in_model;
  if (!args.log_path.empty()) options.records = measure::load_records(args.log_path).records;
  options.protect = {args.source.model, args.log_path};
  ir::PassContextGuard guard(args.pass_context.make());
  graph::CompileReport report = graph::compile_model(model, options, args.output);
  for (const std::string& w : report.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  if (args.as_json) {
    json out = report.to_json();
    out["output"] = args.output;
    out["options"] = args.options.values();
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  int64_t tuned = 0;
  std::printf("%-3s %5s %-8s %-40s %s\n", "#", "calls", "schedule", "operators", "why");
  for (size_t i = 0; i < report.tasks.size(); ++i) {
    const auto& t = report.tasks[i];
    tuned += t.tuned;
    std::string ops =
        t.description.size() > 40 ? t.description.substr(0, 37) + "..." : t.description;
    std::string why = t.why;
    if (t.tuned) {
      char text[64];
      std::snprintf(text, sizeof text, " (%.4f ms)", t.tuned_latency_s * 1e3);
      why += text;
    }
    std::printf("%-3zu %5lld %-8s %-40s %s\n", i, static_cast<long long>(t.occurrences),
                t.tuned ? "tuned" : "default", ops.c_str(), why.c_str());
  }
  int64_t saved = report.intermediate_bytes - report.planned_bytes;
  std::printf(
      "%lld of %zu tasks tuned, %lld kernel calls; intermediates in %s planned (%s without "
      "reuse, %.0f%% saved); weights %s; compiled in %.1f s\n-> %s\n",
      static_cast<long long>(tuned), report.tasks.size(), static_cast<long long>(report.kernels),
      mib(report.planned_bytes).c_str(), mib(report.intermediate_bytes).c_str(),
      report.intermediate_bytes
          ? 100.0 * static_cast<double>(saved) / static_cast<double>(report.intermediate_bytes)
          : 0.0,
      mib(report.weight_bytes).c_str(), report.seconds, args.output.c_str());
  if (!report.in_model.is_null() && !report.in_model.contains("error")) {
    std::printf(
        "in the model: %d of %d tasks timed there took another of their %d best schedules "
        "(%d evaluations of the model in %.1f s)\n",
        report.in_model.at("tasks_changed").get<int>(),
        report.in_model.at("tasks_compared").get<int>(), static_cast<int>(args.in_model.candidates),
        report.in_model.at("evaluations").get<int>(), report.in_model.at("seconds").get<double>());
  }
  return 0;
}

// ---- run --------------------------------------------------------------------

struct RunArgs {
  std::string model_dir, output_dir;
  std::vector<std::string> inputs;
  int repeat = 1;
  int threads = 0;
  uint64_t seed = 0;
  bool as_json = false, profile = false, no_verify = false;
};

/// `name` with every character outside [A-Za-z0-9._-] replaced by '_'.
std::string file_name_of(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

/// A file name for each output in `dir`: NAME.npy (file_name_of), made
/// unique with _2, _3, ... when two names turn into the same one, so that
/// no output is written over another.
std::vector<std::string> output_files(const std::vector<runtime::TensorInfo>& outputs,
                                      const std::string& dir) {
  std::set<std::string> taken;
  std::vector<std::string> files;
  for (const auto& o : outputs) {
    std::string stem = file_name_of(o.name), name = stem + ".npy";
    for (int k = 2; taken.count(name); ++k) name = stem + "_" + std::to_string(k) + ".npy";
    taken.insert(name);
    files.push_back((std::filesystem::path(dir) / name).string());
  }
  return files;
}

int run_run(const RunArgs& args) {
  runtime::CompiledModel m =
      runtime::CompiledModel::load(args.model_dir, runtime::LoadOptions{!args.no_verify});
  std::vector<std::string> out_files;
  if (!args.output_dir.empty()) {
    // The outputs go beside the model, never into it (a folder compile
    // replaces only while it holds what compile wrote), nor over an input.
    TT_CHECK(!path_is_within(args.output_dir, args.model_dir), kInvalidArgument, "--output-dir '",
             args.output_dir, "' is inside the compiled model '", args.model_dir,
             "'; choose a folder of its own");
    out_files = output_files(m.outputs(), args.output_dir);
  }
  m.set_threads(args.threads);
  // Inputs: given by name, or the only input's file alone; random otherwise.
  std::map<std::string, std::string> files;
  for (const std::string& spec : args.inputs) {
    size_t eq = spec.find('=');
    std::string name = eq == std::string::npos ? "" : spec.substr(0, eq);
    std::string file = eq == std::string::npos ? spec : spec.substr(eq + 1);
    if (name.empty()) {
      TT_CHECK(m.inputs().size() == 1, kInvalidArgument, "--input '", spec,
               "' has no NAME=; the model has ", m.inputs().size(), " inputs, so say which");
      name = m.inputs()[0].name;
    }
    bool known = std::any_of(m.inputs().begin(), m.inputs().end(),
                             [&](const runtime::TensorInfo& t) { return t.name == name; });
    if (!known) {
      std::vector<std::string> names;
      for (const auto& t : m.inputs()) names.push_back(t.name);
      fail(ErrorKind::kInvalidArgument, "--input names '", name,
           "', which is no input of the model; its inputs are: ", join(names, ", "));
    }
    TT_CHECK(files.emplace(name, file).second, kInvalidArgument, "--input gives '", name,
             "' twice; give each input once");
    for (const std::string& out : out_files) {
      TT_CHECK(!path_is_within(file, out), kInvalidArgument, "--input '", spec,
               "' would be overwritten by the output file '", out,
               "'; choose another --output-dir");
    }
  }
  std::vector<te::NDArray> inputs;
  for (size_t i = 0; i < m.inputs().size(); ++i) {
    const runtime::TensorInfo& t = m.inputs()[i];
    auto it = files.find(t.name);
    if (it == files.end()) {
      inputs.push_back(te::NDArray::random(t.dtype, t.shape, args.seed + i));
      continue;
    }
    te::NDArray a = read_input(it->second);
    // NumPy has no bfloat16: such an input comes as float32 or as its bits.
    if (a.shape() == t.shape) a = te::as_npy_holds(std::move(a), t.dtype);
    TT_CHECK(a.shape() == t.shape && a.dtype() == t.dtype, kInvalidArgument, it->second, " holds ",
             a.describe(), " but input '", t.name, "' is ",
             te::NDArray(t.dtype, t.shape).describe());
    inputs.push_back(std::move(a));
  }
  // The outputs are allocated once: a fresh allocation per run would put its
  // page faults in the first runs' times (glibc maps large blocks anew until
  // its thresholds adapt).
  std::vector<te::NDArray> outputs = m.make_outputs();
  m.run_into(inputs, outputs);  // warm-up: pages, caches, thread pool
  std::vector<double> latencies, step_seconds, total_step_seconds;
  for (int r = 0; r < args.repeat; ++r) {
    auto start = std::chrono::steady_clock::now();
    if (args.profile) {
      m.run_timed(inputs, outputs, step_seconds);
    } else {
      m.run_into(inputs, outputs);
    }
    latencies.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    total_step_seconds.resize(step_seconds.size());
    for (size_t i = 0; i < step_seconds.size(); ++i) total_step_seconds[i] += step_seconds[i];
  }
  // With --profile --json: each call's row, in the order the calls run.
  json profile_rows = json::array();
  if (args.profile) {
    // Per kernel call, slowest first: where tuning pays. Beside each, its
    // speed and the time its log recorded alone: a call much slower in the
    // model than alone (caches, the kernel before it) shows here; its task's
    // key finds it in `tasks --json` and in the log.
    std::vector<std::string> names = m.step_names();
    std::vector<json> tasks = m.step_tasks();
    double all = 0;
    for (double t : total_step_seconds) all += t;
    for (size_t i = 0; i < names.size(); ++i) {
      const double t = total_step_seconds[i] / args.repeat;
      json row = {{"step", i},
                  {"mean_s", t},
                  {"share", all > 0 ? total_step_seconds[i] / all : 0.0},
                  {"gflops", nullptr},
                  {"alone_s", nullptr},
                  {"operators", names[i]},
                  {"workload_key", nullptr}};
      // The plan's report is read back from disk: a field of another type
      // is left out, never trusted.
      if (!tasks[i].is_null()) {
        const json flops = tasks[i].value("flops", json());
        if (flops.is_number() && flops.get<double>() > 0 && t > 0) {
          row["gflops"] = flops.get<double>() / t / 1e9;
        }
        const json tuned = tasks[i].value("tuned_latency_s", json());
        if (tuned.is_number()) row["alone_s"] = tuned;
        const json key = tasks[i].value("workload_key", json());
        if (key.is_string()) row["workload_key"] = key;
      }
      profile_rows.push_back(std::move(row));
    }
    std::vector<size_t> order(names.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return total_step_seconds[a] > total_step_seconds[b]; });
    std::fprintf(stderr, "%-5s %10s %6s %8s %9s  %-20s  %s\n", "step", "ms", "share", "GFLOP/s",
                 "alone ms", "task", "operators");
    for (size_t i : order) {
      const json& row = profile_rows[i];
      char gflops[32] = "-", alone[32] = "-";
      if (row["gflops"].is_number()) {
        std::snprintf(gflops, sizeof gflops, "%.1f", row["gflops"].get<double>());
      }
      if (row["alone_s"].is_number()) {
        std::snprintf(alone, sizeof alone, "%.3f", row["alone_s"].get<double>() * 1e3);
      }
      const std::string key =
          row["workload_key"].is_string() ? row["workload_key"].get<std::string>() : "-";
      std::fprintf(stderr, "%-5zu %10.3f %5.1f%% %8s %9s  %-20s  %s\n", i,
                   row["mean_s"].get<double>() * 1e3, 100 * row["share"].get<double>(), gflops,
                   alone, key.c_str(), names[i].c_str());
    }
    // The log times a kernel on the threads of the target it was tuned for,
    // which may not be this run's: on 1 thread "alone" reads about twice
    // the call's time in the model.
    // A plan whose target this build cannot read (another build's) only
    // loses the counts, never the run's results.
    int64_t tuned_threads = 0;
    try {
      tuned_threads = ir::hardware_params(ir::Target::parse(m.plan()->target))->num_cores;
    } catch (const UserError&) {
    }
    if (tuned_threads > 0) {
      // A target of one core is compiled without parallel loops.
      const int64_t used = tuned_threads > 1 && args.threads > 0 ? args.threads : tuned_threads;
      std::fprintf(stderr,
                   "alone ms: the time the log recorded for the kernel by itself, on the %lld "
                   "threads of the target it was compiled for; this run used %lld\n",
                   static_cast<long long>(tuned_threads), static_cast<long long>(used));
    } else {
      std::fprintf(stderr,
                   "alone ms: the time the log recorded for the kernel by itself, on the threads "
                   "of the target it was compiled for ('%s')\n",
                   m.plan()->target.c_str());
    }
  }
  std::vector<double> sorted = latencies;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted.size() % 2
                      ? sorted[sorted.size() / 2]
                      : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  if (!args.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.output_dir, ec);
    TT_CHECK(!ec, kIO, "cannot create the output folder '", args.output_dir, "': ", ec.message());
    for (size_t i = 0; i < outputs.size(); ++i) {
      write_file_atomically(out_files[i], te::npy_bytes(outputs[i]));
    }
  }
  json outs = json::array();
  for (size_t i = 0; i < outputs.size(); ++i) {
    outs.push_back({{"name", m.outputs()[i].name},
                    {"shape", outputs[i].shape()},
                    {"dtype", outputs[i].dtype().str()}});
    if (!out_files.empty()) {
      outs.back()["file"] = out_files[i];
      // What the .npy holds: NumPy has no bfloat16.
      if (outputs[i].dtype() == ir::DataType::bfloat16()) outs.back()["file_dtype"] = "float32";
    }
  }
  if (args.as_json) {
    json out = {{"latency_s", median}, {"latencies_s", latencies}, {"outputs", outs}};
    if (args.profile) out["profile"] = std::move(profile_rows);
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const te::NDArray& a = outputs[i];
    const std::string file = out_files.empty() ? "" : " -> " + out_files[i];
    if (a.size() == 0) {
      std::printf("%s %s %s: no elements%s\n", m.outputs()[i].name.c_str(), a.dtype().str().c_str(),
                  shape_text(a.shape()).c_str(), file.c_str());
      continue;
    }
    double lo = 0, hi = 0, sum = 0;
    for (int64_t k = 0; k < a.size(); ++k) {
      double v = a.get(k);
      lo = k ? std::min(lo, v) : v;
      hi = k ? std::max(hi, v) : v;
      sum += v;
    }
    std::printf("%s %s %s: min %g, max %g, mean %g%s\n", m.outputs()[i].name.c_str(),
                a.dtype().str().c_str(), shape_text(a.shape()).c_str(), lo, hi,
                sum / static_cast<double>(a.size()), file.c_str());
  }
  std::printf("latency %.3f ms (median of %d run%s)\n", median * 1e3, args.repeat,
              args.repeat == 1 ? "" : "s");
  return 0;
}

}  // namespace

Command add_tasks_command(CLI::App& app) {
  auto args = std::make_shared<TasksArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tasks", "the tuning tasks of an ONNX model: fused operators, shapes, weights, FLOPs, keys");
  args->source.add_to(cmd);
  cmd->add_flag("--json", args->as_json, "machine-readable output");
  args->pass_context.add_to(cmd);
  return {cmd, [args] { return run_tasks(*args); }};
}

Command add_compile_command(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "compile",
      "compile an ONNX model with a log's best schedules (default schedules for the rest)");
  args->source.add_to(cmd);
  cmd->add_option("--log", args->log_path, "record log to take schedules from");
  cmd->add_flag("--fail-on-default", args->fail_on_default,
                "a task without a tuned schedule in the log is an error");
  cmd->add_flag("--any-pass-context", args->any_pass_context,
                "take records built under any pass context, not only this one");
  cmd->add_option("-o,--output", args->output, "the compiled model (a folder)")->required();
  const std::string lead = "with --in-model-candidates, timing the whole model: ";
  args->options.add(cmd, args->in_model, "in-model-", {"candidates"});
  args->options.add(cmd, args->in_model.timing, "in-model-",
                    {"repeat", "cooldown_ms", "flush_cache"}, lead);
  args->options.add(cmd, args->in_model, "in-model-", {"per_evaluation"}, lead);
  cmd->add_flag("--json", args->as_json, "print the apply report as JSON");
  args->pass_context.add_to(cmd);
  return {cmd, [args] { return run_compile(*args); }};
}

Command add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd =
      app.add_subcommand("run", "run a compiled model (tensortune compile) and time it");
  cmd->add_option("model", args->model_dir, "the compiled model folder")->required();
  cmd->add_option("--input", args->inputs,
                  "NAME=FILE: an input from a .npy or ONNX TensorProto .pb file (random when not "
                  "given); repeatable");
  cmd->add_option("--repeat", args->repeat, "timed runs after one warm-up run")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--threads", args->threads,
                  "threads of the parallel loops (0: the target's cores)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--output-dir", args->output_dir,
                  "write each output to DIR/NAME.npy (NAME with characters outside "
                  "[A-Za-z0-9._-] replaced by _, and _2, _3, ... added when two names "
                  "collide; --json gives each output's file)");
  cmd->add_option("--seed", args->seed, "seed of the random inputs");
  cmd->add_flag("--no-verify", args->no_verify,
                "skip checking each file of the model against the SHA-256 its manifest holds "
                "(sizes and the plan are still checked)");
  cmd->add_flag("--profile", args->profile,
                "time every kernel call too (to stderr, slowest first; with --json also as "
                "\"profile\", in the order the calls run)");
  cmd->add_flag("--json", args->as_json,
                "print {\"latency_s\", \"latencies_s\", \"outputs\": [{\"name\", \"shape\", "
                "\"dtype\"}]} (and \"profile\": [{\"step\", \"mean_s\", \"share\", "
                "\"gflops\", \"alone_s\", \"operators\", \"workload_key\"}] with --profile)");
  return {cmd, [args] { return run_run(*args); }};
}

}  // namespace tensortune::cli
