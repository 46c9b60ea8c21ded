// `tensortune tune`: a tuning run over one task or several (with weights),
// evolutionary search by default (search/evolutionary.h), a task scheduler
// choosing which task goes next, every measurement appended to the log as
// it arrives, and a run with an existing log resumed without measuring a
// program twice. Progress goes to stderr (a live table on a terminal) and,
// with --progress-json, to a file of JSON events; the result to stdout.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <set>

#include "cli_common.h"
#include "tensortune/graph/partition.h"
#include "tensortune/measure/mpi.h"
#include "tensortune/object/serialize.h"
#include "tensortune/search/evolutionary.h"
#include "tensortune/search/tuner.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/workload.h"

namespace tensortune::cli {
namespace {

using json = nlohmann::json;

struct TuneCommandArgs {
  std::string model;
  std::vector<std::string> input_shapes, input_values;
  std::vector<std::string> task_paths;
  std::string tasks_file, workload, workload_args, target = "c", host, log_path;
  bool as_json = false;
  std::string policy = "evolutionary", cost_model = "xgb", cost_model_file;
  std::string scheduler = "gradient", progress_json;
  bool target_given = false;
  /// The library's options themselves, so that each default is written once
  /// (log_path, weights and pass_context are filled in by run_tune).
  search::TuneOptions tune;
  search::EvolutionaryOptions evolution;
  PassContextArgs pass_context;
  MeasureArgs measure;
  measure::MpiOptions mpi;
  CLI::Option* batch_size_flag = nullptr;  ///< to tell whether --batch-size was given
  NodeOptions options;  ///< the flags generated from tune, evolution and measure.timing
};

std::string errors_text(const std::map<std::string, int64_t>& errors) {
  std::string out;
  for (const auto& [code, n] : errors)
    out += (out.empty() ? "" : ", ") + code + " " + std::to_string(n);
  return out.empty() ? "none" : out;
}

/// One task of a tasks file line: {"task": saved task, "weight": w} or
/// {"workload": name, "args": "a,b", "target": "...", "host": "...", "weight": w}.
std::pair<te::Task, double> task_from_line(const json& line) {
  TT_CHECK(line.is_object(), kParse, "a line must be a JSON object, found ", line.type_name());
  double weight = 1;
  if (line.contains("weight")) {
    TT_CHECK(line["weight"].is_number() && line["weight"].get<double>() > 0, kParse,
             "\"weight\" must be a number > 0");
    weight = line["weight"].get<double>();
  }
  for (const auto& [key, value] : line.items()) {
    TT_CHECK(key == "task" || key == "workload" || key == "args" || key == "target" ||
                 key == "host" || key == "weight",
             kParse, "unknown key \"", key,
             "\" (a line has \"task\", or \"workload\", \"args\", \"target\" and \"host\"; and "
             "\"weight\")");
  }
  if (line.contains("task")) {
    return {load_json_as<te::Task>(line["task"]), weight};
  }
  TT_CHECK(line.contains("workload") && line["workload"].is_string(), kParse,
           "a line needs \"task\" (a saved task) or \"workload\" (a registered name)");
  auto text = [&](const char* key, const char* fallback) {
    if (!line.contains(key)) return std::string(fallback);
    TT_CHECK(line[key].is_string(), kParse, "\"", key, "\" must be a string");
    return line[key].get<std::string>();
  };
  ir::Target target = ir::Target::parse(text("target", "c"));
  if (std::string host = text("host", ""); !host.empty()) {
    target = target.with_host(ir::Target::parse(host));
  }
  return {te::Task::make(te::make_named_workload_from_text(line["workload"].get<std::string>(),
                                                           text("args", "")),
                         target),
          weight};
}

/// What the table calls each task: a model's tasks by their operators.
using TaskLabels = std::map<std::string, std::string>;

/// The run's tasks and weights, from a model (extracted under `context`, as
/// compile will extract it), --task, --tasks or --workload.
std::pair<std::vector<te::Task>, std::vector<double>> tasks_of(const TuneCommandArgs& args,
                                                               const ir::PassContext& context,
                                                               TaskLabels& labels) {
  std::vector<te::Task> tasks;
  std::vector<double> weights;
  int sources = (!args.task_paths.empty()) + (!args.tasks_file.empty()) + (!args.workload.empty()) +
                (!args.model.empty());
  TT_CHECK(sources == 1, kInvalidArgument,
           "give the tasks one way: a model MODEL.onnx, --task FILE (repeatable), --tasks FILE, "
           "or --workload NAME --args A,B,...");
  TT_CHECK((args.input_shapes.empty() && args.input_values.empty()) || !args.model.empty(),
           kInvalidArgument,
           "--input-shape and --input-value are for a model (tensortune tune MODEL.onnx)");
  if (!args.model.empty()) {
    // A model is tuned for this CPU unless told otherwise, as `tasks` and
    // `compile` extract and compile it.
    ir::Target target = ir::Target::parse(args.target_given ? args.target : "native");
    if (!args.host.empty()) target = target.with_host(ir::Target::parse(args.host));
    graph::Partition partition = [&] {
      ir::PassContextGuard guard(context);
      return graph::partition_model(load_model(args.model, args.input_shapes, args.input_values),
                                    target);
    }();
    if (!partition.fallback_reason.empty()) {
      std::fprintf(
          stderr,
          "warning: the graph passes failed (%s); tuning the tasks of the graph as imported\n",
          partition.fallback_reason.c_str());
    }
    for (const auto& t : partition.tasks) {
      tasks.push_back(t.task);
      weights.push_back(static_cast<double>(t.occurrences));
      labels[t.workload_key] = t.description;
    }
    TT_CHECK(!tasks.empty(), kInvalidArgument, args.model, " has no operator to tune");
  }
  for (const auto& path : args.task_paths) {
    tasks.push_back(load_task(path));
    weights.push_back(1);
  }
  if (!args.tasks_file.empty()) {
    std::string text = read_file(args.tasks_file);
    size_t line_number = 0, begin = 0;
    while (begin <= text.size()) {
      size_t end = text.find('\n', begin);
      if (end == std::string::npos) end = text.size();
      std::string_view line = trim(std::string_view(text).substr(begin, end - begin));
      ++line_number;
      begin = end + 1;
      if (line.empty()) continue;
      try {
        auto [task, weight] = task_from_line(parse_json_text(line, "task line"));
        check_file_target(task, "the line");
        tasks.push_back(task);
        weights.push_back(weight);
      } catch (const UserError& e) {
        fail(e.kind(), args.tasks_file, ":", line_number, ": ", e.what());
      }
    }
    TT_CHECK(!tasks.empty(), kInvalidArgument, "the tasks file ", args.tasks_file,
             " lists no task");
  }
  if (!args.workload.empty()) {
    ir::Target target = ir::Target::parse(args.target);
    if (!args.host.empty()) target = target.with_host(ir::Target::parse(args.host));
    tasks.push_back(te::Task::make(
        te::make_named_workload_from_text(args.workload, args.workload_args), target));
    weights.push_back(1);
  }
  return {tasks, weights};
}

std::string ms(std::optional<double> seconds) {
  if (!seconds) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", *seconds * 1e3);
  return text;
}

std::string gflops(std::optional<double> g) {
  if (!g) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", *g);
  return text;
}

/// Seconds the run has left, estimated from what its trials cost so far.
std::optional<double> estimated_left(const search::TuneReport& r, int64_t goal, double budget) {
  if (r.trials <= 0) return std::nullopt;
  double left = r.elapsed_s / static_cast<double>(r.trials) * static_cast<double>(goal - r.trials);
  if (budget > 0) left = std::min(left, std::max(0.0, budget - r.elapsed_s));
  return left;
}

/// The live table on stderr: drawn over itself on a terminal, one line per
/// batch otherwise.
class ProgressTable {
 public:
  ProgressTable(int64_t goal, double budget, const TaskLabels& labels)
      : goal_(goal), budget_(budget), labels_(labels), live_(::isatty(STDERR_FILENO) != 0) {}

  void update(const search::TaskSummary& batch, const search::TuneReport& r) {
    auto left = estimated_left(r, goal_, budget_);
    char head[256];
    std::snprintf(
        head, sizeof head, "[%6.1f s] %lld/%lld trials, weighted latency %s ms, %s left",
        r.elapsed_s, static_cast<long long>(r.trials), static_cast<long long>(goal_),
        ms(r.weighted_latency()).c_str(),
        left ? (std::to_string(static_cast<long long>(std::ceil(*left))) + " s").c_str() : "?");
    if (!live_) {
      std::string key = batch.task.workload_key();
      if (auto it = labels_.find(key); it != labels_.end()) key += " (" + it->second + ")";
      std::fprintf(stderr, "%s  %s: best %s ms, %s GFLOP/s  errors: %s\n", head, key.c_str(),
                   ms(batch.best_latency()).c_str(), gflops(batch.best_gflops()).c_str(),
                   errors_text(batch.errors).c_str());
      return;
    }
    std::string out;
    if (lines_ > 0) out += "\033[" + std::to_string(lines_) + "A";
    auto line = [&](const std::string& text) { out += "\033[2K" + text + "\n"; };
    line(head);
    for (const std::string& row : rows(r, labels_)) line(row);
    lines_ = static_cast<int>(r.tasks.size()) + 2;
    std::fputs(out.c_str(), stderr);
  }

  static std::vector<std::string> rows(const search::TuneReport& r, const TaskLabels& labels) {
    std::vector<std::string> out;
    char text[512];
    std::snprintf(text, sizeof text, "  %-44s %6s %7s %11s %9s %14s  %s", "task", "weight",
                  "trials", "best ms", "GFLOP/s", "weighted ms", "errors");
    out.push_back(text);
    for (const auto& s : r.tasks) {
      std::optional<double> weighted;
      if (auto l = s.best_latency()) weighted = *l * s.weight;
      std::string key = s.task.workload_key();
      if (auto it = labels.find(key); it != labels.end()) key = it->second;
      if (key.size() > 44) key = key.substr(0, 41) + "...";
      std::snprintf(text, sizeof text, "  %-44s %6g %7lld %11s %9s %14s  %s%s", key.c_str(),
                    s.weight, static_cast<long long>(s.trials), ms(s.best_latency()).c_str(),
                    gflops(s.best_gflops()).c_str(), ms(weighted).c_str(),
                    errors_text(s.errors).c_str(),
                    s.early_stopped ? " (stopped: no improvement)"
                    : s.exhausted   ? " (no new programs)"
                                    : "");
      out.push_back(text);
    }
    return out;
  }

 private:
  int64_t goal_;
  double budget_;
  const TaskLabels& labels_;
  bool live_;
  int lines_ = 0;
};

/// --progress-json: one JSON object per line, flushed as it is written.
class ProgressEvents {
 public:
  explicit ProgressEvents(const std::string& path) {
    if (path.empty()) return;
    out_.open(path, std::ios::out | std::ios::trunc);
    TT_CHECK(out_.good(), kIO, "cannot write the progress file '", path, "'");
  }
  void write(const json& event) {
    if (!out_.is_open()) return;
    out_ << event.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
    out_.flush();
  }

 private:
  std::ofstream out_;
};

json task_json(const search::TaskSummary& s) {
  return {{"workload_key", s.task.workload_key()},
          {"target", s.task->target.str()},
          {"weight", s.weight},
          {"trials", s.trials},
          {"resumed", s.resumed},
          {"best_latency_s", s.best_latency() ? json(*s.best_latency()) : json(nullptr)},
          {"best_gflops", s.best_gflops() ? json(*s.best_gflops()) : json(nullptr)},
          {"errors", s.errors}};
}

json time_json(const search::TimeSplit& t) {
  return {{"search_s", t.search_s}, {"training_s", t.training_s}, {"build_s", t.build_s},
          {"run_s", t.run_s},       {"kernel_s", t.kernel_s},     {"other_s", t.other_s}};
}

/// How the kernels' inputs are prepared before every timed call, for the
/// tune command's first line ("" when calls run back to back as they are).
std::string timing_note(const measure::RunnerOptions& timing) {
  std::vector<std::string> done;
  if (timing.flush_weights) done.push_back("weights evicted");
  if (timing.fresh_activations) done.push_back("activations written");
  if (done.empty()) return "";
  return ", " + join(done, " and ") + " before every call";
}

/// The ranks of an MPI job, for the tune command's first line.
std::string ranks_note(const measure::MpiCluster& cluster) {
  int64_t builders = 0, runners = 0;
  std::set<std::string> hosts;
  for (const auto& r : cluster.ranks()) {
    builders += r.build_workers;
    runners += r.runner;
    hosts.insert(r.host);
  }
  return ", over " + std::to_string(cluster.ranks().size()) + " MPI ranks on " +
         std::to_string(hosts.size()) + " host" + (hosts.size() == 1 ? "" : "s") + " (" +
         std::to_string(builders) + " build workers, " + std::to_string(runners) + " runner" +
         (runners == 1 ? "" : "s") + ")";
}

int run_tune(const TuneCommandArgs& args) {
  // Under mpirun every rank runs this command: rank 0 tunes, the others
  // serve its builds and runs (measure/mpi.h).
  std::unique_ptr<measure::MpiJob> job;
  if (measure::launched_by_mpi()) {
    const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
    if (measure::mpi_built()) {
      job = std::make_unique<measure::MpiJob>();
      if (job->rank() != 0) return job->serve();
    } else {
      // Each rank would tune alone, into the same log.
      TT_CHECK(!size || std::string(size) == "1", kRuntime, "started by mpirun with ", size,
               " ranks, but this tensortune was built without "
               "MPI: install Open MPI (Debian: libopenmpi-dev openmpi-bin) and build again");
    }
  }
  // A model's kernels find their weights in memory, not in the caches: so
  // they are timed, unless --warm-weights says otherwise.
  const measure::LocalRunnerOptions runner_options =
      args.measure.runner_options(!args.model.empty());
  // Before anything that can fail: the serving ranks wait for rank 0.
  std::unique_ptr<measure::MpiCluster> cluster;
  if (job && job->size() > 1) {
    measure::MpiOptions mpi = args.mpi;
    mpi.target_given = args.target_given;
    cluster = std::make_unique<measure::MpiCluster>(*job, args.measure.builder_options(),
                                                    runner_options, mpi);
  }
  TaskLabels labels;
  // The run's one context: extraction runs the graph passes under it, every
  // candidate is built under it, and only records built under it are
  // resumed (unless --any-pass-context).
  const ir::PassContext context = args.pass_context.make();
  auto [tasks, weights] = tasks_of(args, context, labels);
  std::unique_ptr<search::TaskScheduler> scheduler = search::make_task_scheduler(args.scheduler);
  search::PolicyFactory policy;
  std::shared_ptr<search::SharedCostModel> model;
  if (args.policy == "random") {
    policy = [](const te::Task& t, uint64_t seed) -> std::unique_ptr<search::SearchPolicy> {
      return std::make_unique<search::RandomSearchPolicy>(t, seed);
    };
  } else {
    TT_CHECK(args.policy == "evolutionary", kInvalidArgument, "unknown policy '", args.policy,
             "'; the policies are: evolutionary, random");
    model = std::make_shared<search::SharedCostModel>(
        args.cost_model_file.empty()
            ? search::make_cost_model(args.cost_model, args.tune.seed)
            : search::load_cost_model(args.cost_model_file, args.tune.seed));
    policy = search::evolutionary_policy(model, args.evolution);
  }
  measure::install_interrupt_cleanup();
  std::unique_ptr<measure::LocalBuilder> local_builder;
  std::unique_ptr<measure::LocalRunner> local_runner;
  if (!cluster) {
    local_builder = std::make_unique<measure::LocalBuilder>(args.measure.builder_options());
    local_runner = std::make_unique<measure::LocalRunner>(runner_options);
  }
  measure::Builder& builder = cluster ? cluster->builder() : *local_builder;
  measure::Runner& runner = cluster ? cluster->runner() : *local_runner;
  search::TuneOptions options = args.tune;
  if (cluster && args.batch_size_flag && args.batch_size_flag->count() == 0) {
    int64_t workers = 0;
    for (const auto& r : cluster->ranks()) workers += r.build_workers;
    options.batch_size = static_cast<int>(measure::cluster_batch_size(options.batch_size, workers));
  }
  options.log_path = args.log_path;
  options.weights = weights;
  options.pass_context = context;

  std::fprintf(stderr, "tuning %zu task%s on %s%s: %lld new trials%s, %s search%s, log %s\n",
               tasks.size(), tasks.size() == 1 ? "" : "s", tasks[0]->target.str().c_str(),
               cluster ? (ranks_note(*cluster) + ", " + std::to_string(options.batch_size) +
                          " candidates per round")
                             .c_str()
                       : "",
               static_cast<long long>(args.tune.trials),
               args.tune.time_budget_s > 0
                   ? (" within " + format_double(args.tune.time_budget_s) + " s").c_str()
                   : "",
               args.policy == "random"
                   ? "random"
                   : (args.policy + "/" + (model ? model->model().name() : "")).c_str(),
               timing_note(runner_options.timing).c_str(), args.log_path.c_str());
  ProgressTable table(args.tune.trials, args.tune.time_budget_s, labels);
  // The progress file is rewritten from the start: never over what the run reads.
  std::vector<std::string> inputs = args.task_paths;
  for (const std::string& p : {args.log_path, args.tasks_file, args.model, args.cost_model_file}) {
    inputs.push_back(p);
  }
  if (!args.progress_json.empty()) check_not_an_input(args.progress_json, inputs);
  ProgressEvents events(args.progress_json);
  {
    json list = json::array();
    for (size_t i = 0; i < tasks.size(); ++i) {
      list.push_back({{"workload_key", tasks[i].workload_key()}, {"weight", weights[i]}});
    }
    events.write({{"event", "start"},
                  {"tasks", list},
                  {"trials", args.tune.trials},
                  {"time_budget_s",
                   args.tune.time_budget_s > 0 ? json(args.tune.time_budget_s) : json(nullptr)},
                  {"policy", args.policy},
                  {"scheduler", scheduler->name()}});
  }
  std::map<std::string, int64_t> trial_numbers;
  search::TuneHooks hooks;
  hooks.scheduler = scheduler.get();
  hooks.progress = [&](const search::TaskSummary& s, const search::TuneReport& so_far) {
    table.update(s, so_far);
    auto left = estimated_left(so_far, args.tune.trials, args.tune.time_budget_s);
    json e = {{"event", "batch"},
              {"elapsed_s", so_far.elapsed_s},
              {"trials", so_far.trials},
              {"weighted_latency_s", so_far.weighted_latency()},
              {"estimated_left_s", left ? json(*left) : json(nullptr)},
              {"task", task_json(s)}};
    events.write(e);
  };
  hooks.result = [&](const measure::MeasureInput& input, const measure::MeasureResult& result) {
    std::string key = input.task.workload_key();
    print_instruments(result.instruments,
                      "build worker, " + key + " trial " + std::to_string(++trial_numbers[key]));
  };
  search::TuneReport report = search::tune(tasks, policy, builder, runner, options, hooks);
  events.write({{"event", "end"},
                {"elapsed_s", report.elapsed_s},
                {"trials", report.trials},
                {"stop_reason", report.stop_reason},
                {"weighted_latency_s", report.weighted_latency()},
                {"time", time_json(report.time)}});
  for (const auto& s : report.tasks) {
    if (s.other_context_records == 0) continue;
    std::vector<std::string> hashes;
    for (const auto& h : s.other_contexts) hashes.push_back(h.str());
    std::fprintf(stderr,
                 "note: %s holds %zu records of %s built under other pass contexts (%s), not this "
                 "run's (%s): they were not resumed; --any-pass-context resumes them\n",
                 args.log_path.c_str(), s.other_context_records, s.task.workload_key().c_str(),
                 join(hashes, ", ").c_str(),
                 measure::Hash64(report.pass_context.hash()).str().c_str());
  }
  if (model && !model->note().empty() && !model->model().trained()) {
    std::fprintf(stderr, "note: %s\n", model->note().c_str());
  }

  // A rank lost during the run did no harm to the log, but the job failed:
  // and MPI_Finalize would wait for it, so the job is ended here.
  auto finish = [&](int code) {
    if (!cluster) return code;
    std::vector<std::string> lost;
    for (const auto& r : cluster->ranks()) {
      if (r.lost) lost.push_back("rank " + std::to_string(r.rank) + " on " + r.host);
    }
    if (lost.empty()) return code;
    std::fprintf(stderr,
                 "error: lost %s during the run; the other ranks took over its work and the log "
                 "holds every result\n",
                 join(lost, ", ").c_str());
    std::cout.flush();
    cluster->end_after_loss(code != 0 ? code : 4);
  };
  bool any_failed = false;
  json tasks_out = json::array();
  for (const auto& s : report.tasks) {
    any_failed |= s.failed();
    json t = task_json(s);
    if (auto it = labels.find(s.task.workload_key()); it != labels.end())
      t["operators"] = it->second;
    t["pass_context_hash"] = measure::Hash64(report.pass_context.hash()).str();
    t["status"] = s.failed() ? "failed" : s.best ? "ok" : "not measured";
    if (s.failed()) t["error_message"] = s.sample_error;
    if (s.exhausted) t["exhausted"] = true;
    if (s.early_stopped) t["early_stopped"] = true;
    t["confirm_trials"] = s.confirm_trials;
    t["improved"] = s.improved;
    tasks_out.push_back(t);
  }
  const search::TimeSplit& time = report.time;
  if (args.as_json) {
    json out = {{"tasks", tasks_out},
                {"trials", report.trials},
                {"elapsed_s", report.elapsed_s},
                {"stop_reason", report.stop_reason},
                {"weighted_latency_s", report.weighted_latency()},
                {"time", time_json(time)},
                {"options", args.options.values()}};
    std::cout << out.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
    return finish(any_failed ? 3 : 0);
  }
  for (const auto& row : ProgressTable::rows(report, labels)) std::printf("%s\n", row.c_str());
  std::printf("%lld new trials in %.1f s (stopped by: %s); weighted latency %s ms\n",
              static_cast<long long>(report.trials), report.elapsed_s, report.stop_reason.c_str(),
              ms(report.weighted_latency()).c_str());
  double total = std::max(report.elapsed_s, 1e-9);
  auto share = [&](double s) { return 100.0 * s / total; };
  std::printf(
      "time: search %.1f s (%.0f%%), cost model %.1f s (%.0f%%), build %.1f s (%.0f%%), "
      "run %.1f s (%.0f%%; in kernels %.1f s), other %.1f s (%.0f%%)\n",
      time.search_s, share(time.search_s), time.training_s, share(time.training_s), time.build_s,
      share(time.build_s), time.run_s, share(time.run_s), time.kernel_s, time.other_s,
      share(time.other_s));
  for (const auto& s : report.tasks) {
    if (s.failed()) {
      std::printf("%s: FAILED, every one of %lld candidates (%s)\n  %s\n",
                  s.task.workload_key().c_str(), static_cast<long long>(s.trials + s.resumed),
                  errors_text(s.errors).c_str(), s.sample_error.c_str());
    } else if (s.trials > 0 && !s.improved) {
      std::printf("%s: no better schedule than the %lld resumed from the log\n",
                  s.task.workload_key().c_str(), static_cast<long long>(s.resumed));
    }
  }
  if (!args.log_path.empty()) std::printf("records in %s\n", args.log_path.c_str());
  return finish(any_failed ? 3 : 0);
}

}  // namespace

Command add_tune_command(CLI::App& app) {
  auto args = std::make_shared<TuneCommandArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "search schedules of a model's tasks or of given tasks, recording every measurement (exit 3 "
      "if a task fails)");
  cmd->add_option("model", args->model,
                  "an ONNX model: its tasks (tensortune tasks), weighted by occurrences");
  cmd->add_option("--input-shape", args->input_shapes,
                  "with a model: NAME=DIMS for an input whose shape it leaves open; repeatable");
  cmd->add_option(
      "--input-value", args->input_values,
      "with a model: NAME=FILE to fix an input to a value, as compile does; repeatable");
  cmd->add_option("--task", args->task_paths, "a task file (tensortune task); repeatable");
  add_trust_file_compiler_flag(cmd);
  cmd->add_option("--tasks", args->tasks_file,
                  "a file of tasks, one JSON object per line: {\"task\": saved task} or "
                  "{\"workload\", \"args\", \"target\"}, with an optional \"weight\"");
  cmd->add_option("--workload", args->workload, "registered workload name (instead of --task)");
  cmd->add_option("--args", args->workload_args, "workload arguments, comma-separated");
  cmd->add_option(
         "--target", args->target,
         "target string, e.g. \"c -mcpu=native -num-cores=2\" (default c; native with a model)")
      ->each([args](const std::string&) { args->target_given = true; });
  cmd->add_option("--host", args->host, "host target string");
  cmd->add_option("--log", args->log_path, "record log: appended to, and resumed from")->required();
  cmd->add_flag("--json", args->as_json, "machine-readable output");
  cmd->add_option("--policy", args->policy, "search policy: evolutionary (default) or random");
  cmd->add_option("--cost-model", args->cost_model,
                  "cost model of the evolutionary policy: xgb (default) or random");
  cmd->add_option("--cost-model-file", args->cost_model_file,
                  "start from this trained model (tensortune train-model)");
  cmd->add_option("--scheduler", args->scheduler,
                  "which task goes next: gradient (default) or round-robin");
  cmd->add_option("--progress-json", args->progress_json,
                  "also write progress as JSON events, one per line, to this file");
  args->options.add(cmd, args->tune);
  args->options.add(cmd, args->evolution);
  args->options.add(cmd, args->evolution.annotate);
  args->measure.add_to(cmd, args->options);
  args->options.add(cmd, args->mpi);
  args->batch_size_flag = cmd->get_option("--batch-size");
  args->pass_context.add_to(cmd);
  return {cmd, [args] { return run_tune(*args); }};
}

}  // namespace tensortune::cli
