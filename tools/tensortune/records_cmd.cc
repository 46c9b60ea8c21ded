// `tensortune records`: read, summarise and rewrite measurement logs
// (measure/record.h). Skipped lines are warned about on stderr and do not
// change the exit status; a line of a newer format version is an error.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "cli_common.h"
#include "tensortune/measure/record.h"
#include "tensortune/object/serialize.h"
#include "tensortune/schedule/compute_dag.h"
#include "tensortune/support/strings.h"
#include "tensortune/te/workload.h"

namespace tensortune::cli {
namespace {

using json = nlohmann::json;
using measure::Record;

struct RecordsArgs {
  std::vector<std::string> logs;
  std::string output;
  bool as_json = false;
  size_t k = 1;
};

std::string format(double value, const char* spec) {
  char text[64];
  std::snprintf(text, sizeof text, spec, value);
  return text;
}

// Floating-point operations per call of each workload, by key; nullopt when
// the workload cannot be built here (a workload this build does not know).
class FlopCounts {
 public:
  std::optional<double> of(const te::Task& task) {
    std::string key = task.workload_key();
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    std::optional<double> flops;
    try {
      double count = schedule::ComputeDAG(te::workload_tensors(task->workload)).flop_count();
      if (count > 0) flops = count;
    } catch (const UserError& e) {
    }
    return cache_[key] = flops;
  }

  /// GFLOP/s of a successful record, when the flop count is known.
  std::optional<double> gflops(const Record& r) {
    std::optional<double> flops = of(r.input.task);
    if (!flops || !r.result.ok() || !(r.result.median_cost() > 0)) return std::nullopt;
    return *flops / r.result.median_cost() / 1e9;
  }

 private:
  std::map<std::string, std::optional<double>> cache_;
};

// The first line of an error message, cut for a one-line listing.
std::string short_message(const std::string& message) {
  std::string line(trim(message.substr(0, message.find('\n'))));
  constexpr size_t kWidth = 100;
  if (line.size() > kWidth) line = line.substr(0, kWidth - 3) + "...";
  return line.empty() ? std::string("(no message)") : line;
}

// A record for people and scripts: the task by key, the state's saved graph
// (its steps) and the result's fields.
json record_json(const Record& r) {
  return {{"workload_key", r.input.task.workload_key()},
          {"target", r.input.task->target.str()},
          {"state", save_json(r.input.state)},
          {"result", field_values(r.result)}};
}

std::string lines_of(const std::vector<Record>& records) {
  std::string text;
  for (const Record& r : records) text += measure::record_to_line(r) + "\n";
  return text;
}

int show(const RecordsArgs& args) {
  measure::LogContents log = measure::load_records(args.logs.at(0));
  if (args.as_json) {
    json out = json::array();
    for (const Record& r : log.records) out.push_back(record_json(r));
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  FlopCounts flops;
  for (const Record& r : log.records) {
    std::cout << r.input.task.workload_key() << "  " << r.input.task->target.str() << "  "
              << measure::error_code_name(r.result.error_code) << "  ";
    if (r.result.ok()) {
      std::cout << format(r.result.median_cost() * 1e3, "%.4g") << " ms";
      if (auto g = flops.gflops(r)) std::cout << "  " << format(*g, "%.4g") << " GFLOP/s";
    } else {
      std::cout << short_message(r.result.error_message);
    }
    // Who measured it: the host, and the MPI rank in a job's log.
    if (!r.result.host.empty()) {
      std::cout << "  on " << r.result.host;
      if (r.result.rank >= 0) std::cout << " rank " << r.result.rank;
    }
    std::cout << "\n";
  }
  return 0;
}

// What `records best` reports about one task under one pass context.
struct TaskSummary {
  te::Task task;
  measure::Hash64 pass_context;
  size_t trials = 0;
  std::map<measure::ErrorCode, size_t> errors;  ///< failed trials by code
  std::map<measure::ErrorCode, std::string> first_message;
  std::optional<Record> best;
};

// Failure codes, most frequent first (ties in enum order).
std::vector<std::pair<measure::ErrorCode, size_t>> by_frequency(
    const std::map<measure::ErrorCode, size_t>& errors) {
  std::vector<std::pair<measure::ErrorCode, size_t>> sorted(errors.begin(), errors.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return sorted;
}

std::string describe_errors(const std::map<measure::ErrorCode, size_t>& errors) {
  std::vector<std::string> parts;
  for (const auto& [code, n] : by_frequency(errors)) {
    parts.push_back(std::string(measure::error_code_name(code)) + " x" + std::to_string(n));
  }
  return join(parts, ", ");
}

int best(const RecordsArgs& args) {
  measure::LogContents log = measure::load_records(args.logs.at(0));
  // Tasks in order of first appearance, so the report follows the log.
  std::vector<TaskSummary> tasks;
  std::map<std::string, size_t> index;
  std::set<std::string> contexts;
  // The best as compile and apply pick it (a schedule's records pooled).
  std::map<std::string, Record> best = measure::best_per_task(log.records);
  for (const Record& r : log.records) {
    auto [it, added] = index.emplace(measure::group_key(r), tasks.size());
    if (added) {
      tasks.emplace_back();
      tasks.back().task = r.input.task;
      tasks.back().pass_context = r.result.pass_context_hash;
      if (auto b = best.find(it->first); b != best.end()) tasks.back().best = b->second;
    }
    contexts.insert(r.result.pass_context_hash.str());
    TaskSummary& t = tasks[it->second];
    ++t.trials;
    if (!r.result.ok()) {
      ++t.errors[r.result.error_code];
      t.first_message.emplace(r.result.error_code, r.result.error_message);
    }
  }

  FlopCounts flops;
  json out = json::array();
  for (const TaskSummary& t : tasks) {
    size_t failed = 0;
    for (const auto& [code, n] : t.errors) failed += n;
    // A task with no success has no latency: report why it failed instead of a 0 GFLOP/s.
    std::string message;
    if (!t.best) message = t.first_message.at(by_frequency(t.errors).front().first);
    // -1 for unknown rather than std::optional: GCC 12 at -O2 warns that the
    // optional's value may be used uninitialised (a false positive).
    double gflops = -1;
    if (t.best) gflops = flops.gflops(*t.best).value_or(-1);
    if (args.as_json) {
      json errors = json::object();
      for (const auto& [code, n] : t.errors)
        errors[std::string(measure::error_code_name(code))] = n;
      json j = {{"workload_key", t.task.workload_key()},
                {"target", t.task->target.str()},
                {"pass_context_hash", t.pass_context.str()},
                {"status", t.best ? "ok" : "failed"},
                {"trials", t.trials},
                {"failed_trials", failed},
                {"errors", errors},
                {"latency_ms", t.best ? json(t.best->result.median_cost() * 1e3) : json(nullptr)},
                {"gflops", gflops >= 0 ? json(gflops) : json(nullptr)}};
      if (t.best) j["best"] = record_json(*t.best);
      if (!t.best) j["message"] = message;
      out.push_back(std::move(j));
      continue;
    }
    std::cout << t.task.workload_key() << "  " << t.task->target.str() << "  ";
    // Several contexts tuned the same task: which line is which.
    if (contexts.size() > 1) std::cout << "pass context " << t.pass_context.str() << "  ";
    if (t.best) {
      std::cout << format(t.best->result.median_cost() * 1e3, "%.4g") << " ms";
      if (gflops >= 0) std::cout << "  " << format(gflops, "%.4g") << " GFLOP/s";
      std::cout << "  " << t.trials << " trials";
      if (failed > 0)
        std::cout << " (" << failed << " failed: " << describe_errors(t.errors) << ")";
      std::cout << "\n";
    } else {
      std::cout << "FAILED  all " << t.trials << " trials failed (" << describe_errors(t.errors)
                << ")\n";
      for (const std::string& line : split(message, '\n')) std::cout << "    " << line << "\n";
    }
  }
  if (args.as_json) std::cout << out.dump(1) << "\n";
  return 0;
}

int merge(const RecordsArgs& args) {
  std::vector<std::vector<Record>> logs;
  size_t total = 0;
  for (const std::string& path : args.logs) {
    measure::LogContents contents = measure::load_records(path);
    // A line it cannot read would be dropped from the merged log: refused.
    if (!contents.warnings.empty()) {
      fail(ErrorKind::kParse, path, ":", contents.warnings.front().line, ": ",
           contents.warnings.front().message, " (", contents.warnings.size(),
           " unreadable line(s); merge keeps every line or writes nothing: mend or remove them "
           "first)");
    }
    logs.push_back(std::move(contents.records));
    total += logs.back().size();
  }
  std::vector<Record> merged = measure::merge_records(logs);
  write_output(args.output, lines_of(merged), args.logs);
  std::cerr << "wrote " << merged.size() << " records to " << args.output << " (from "
            << logs.size() << " logs, " << total - merged.size() << " duplicates dropped)\n";
  return 0;
}

int distill(const RecordsArgs& args) {
  std::vector<Record> records = measure::load_records(args.logs.at(0)).records;
  std::vector<Record> kept = measure::distill_records(records, args.k);
  write_output(args.output, lines_of(kept), args.logs);
  std::cerr << "wrote " << kept.size() << " of " << records.size() << " records to " << args.output
            << " (the records of the best " << args.k << " schedules per task)\n";
  return 0;
}

}  // namespace

Command add_records_command(CLI::App& app) {
  auto args = std::make_shared<RecordsArgs>();
  CLI::App* records = app.add_subcommand("records", "read, summarise and rewrite measurement logs");
  records->require_subcommand(1);

  CLI::App* show_cmd = records->add_subcommand("show", "list every record of a log");
  show_cmd->add_option("log", args->logs, "a record log (one JSON record per line)")
      ->required()
      ->expected(1);
  show_cmd->add_flag("--json", args->as_json, "print the records as a JSON array");

  CLI::App* best_cmd =
      records->add_subcommand("best", "the best record of each task, with failure counts");
  best_cmd->add_option("log", args->logs, "a record log")->required()->expected(1);
  best_cmd->add_flag("--json", args->as_json, "machine-readable output");

  CLI::App* merge_cmd =
      records->add_subcommand("merge", "concatenate logs, dropping exact duplicates");
  merge_cmd->add_option("logs", args->logs, "record logs, in order")->required();
  merge_cmd->add_option("-o,--output", args->output, "the merged log ('-': standard output)")
      ->required();

  CLI::App* distill_cmd =
      records->add_subcommand("distill", "keep the records of the k best schedules of each task");
  distill_cmd->add_option("log", args->logs, "a record log")->required()->expected(1);
  distill_cmd->add_option("-k", args->k, "schedules kept per task")->check(CLI::Range(1, 1000000));
  distill_cmd->add_option("-o,--output", args->output, "the distilled log ('-': standard output)")
      ->required();

  auto run = [=]() -> int {
    if (*show_cmd) return show(*args);
    if (*best_cmd) return best(*args);
    if (*merge_cmd) return merge(*args);
    if (*distill_cmd) return distill(*args);
    return 1;  // unreachable: require_subcommand(1)
  };
  return {records, run};
}

}  // namespace tensortune::cli
