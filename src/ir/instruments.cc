// The built-in instruments. Each keeps only plain data, and results() returns
// it as JSON, so a worker can send it back to the tuner (docs/architecture.md invariant 6).
#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensortune/ir/pass_context.h"
#include "tensortune/object/structural.h"
#include "tensortune/support/strings.h"

namespace tensortune::ir {
namespace {

using json = nlohmann::json;

void check_params(std::string_view instrument, const json& params,
                  std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : params.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::vector<std::string> names(allowed.begin(), allowed.end());
      fail(ErrorKind::kInvalidArgument, "instrument '", instrument, "': unknown parameter '", key,
           "'; parameters: ", names.empty() ? std::string("(none)") : join(names, ", "));
    }
  }
}

// '*' matches any run of characters, '?' any one character.
bool glob_match(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

/// Pass-name patterns from a "filter" parameter: a glob or a list of globs.
class PassFilter {
 public:
  PassFilter(std::string_view instrument, const json& params, const char* fallback) {
    auto it = params.find("filter");
    if (it == params.end()) {
      if (!fallback) {
        fail(ErrorKind::kInvalidArgument, "instrument '", instrument,
             "': parameter 'filter' (a glob or list of globs over pass names) is required");
      }
      patterns_.push_back(fallback);
      return;
    }
    auto bad = [&] {
      fail(ErrorKind::kTypeMismatch, "instrument '", instrument,
           "': parameter 'filter' must be a glob or a list of globs, got ", it->dump());
    };
    if (it->is_string()) {
      patterns_.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const auto& p : *it) {
        if (!p.is_string()) bad();
        patterns_.push_back(p.get<std::string>());
      }
    } else {
      bad();
    }
  }
  bool matches(std::string_view pass) const {
    for (const auto& p : patterns_) {
      if (glob_match(p, pass)) return true;
    }
    return false;
  }

 private:
  std::vector<std::string> patterns_;
};

/// "pass_names": the names of the passes that ran, in order.
class PassNames final : public Instrument {
 public:
  explicit PassNames(const json& params) { check_params("pass_names", params, {}); }
  void after_pass(std::string_view pass, const ObjectPtr&) override { names_.emplace_back(pass); }
  json results() const override { return names_; }

 private:
  std::vector<std::string> names_;
};

/// "pass_timing": wall time of each pass that ran, in the order they finished.
class PassTiming final : public Instrument {
 public:
  explicit PassTiming(const json& params) { check_params("pass_timing", params, {}); }
  void before_pass(std::string_view pass, const ObjectPtr&) override {
    // A stack, because a pass may run passes of its own through run_pass.
    starts_.push_back({std::string(pass), Clock::now()});
  }
  void after_pass(std::string_view pass, const ObjectPtr&) override {
    // A nested pass that threw never reached after_pass; drop its start so
    // that it is not taken for this pass's.
    while (!starts_.empty() && starts_.back().first != pass) starts_.pop_back();
    if (starts_.empty()) return;
    double seconds = std::chrono::duration<double>(Clock::now() - starts_.back().second).count();
    starts_.pop_back();
    entries_.push_back({std::string(pass), seconds});
  }
  json results() const override {
    json passes = json::array();
    for (const auto& [pass, seconds] : entries_) {
      passes.push_back({{"pass", pass}, {"seconds", seconds}});
    }
    return passes;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<std::string, Clock::time_point>> starts_;
  std::vector<std::pair<std::string, double>> entries_;
};

/// "print_ir": the printed IR before and/or after the passes a filter selects.
class PrintIr final : public Instrument {
 public:
  explicit PrintIr(const json& params) : filter_("print_ir", params, "*") {
    check_params("print_ir", params, {"filter", "when"});
    std::string when = "after";
    if (auto it = params.find("when"); it != params.end()) {
      if (!it->is_string() || (*it != "before" && *it != "after" && *it != "both")) {
        fail(ErrorKind::kInvalidArgument,
             "instrument 'print_ir': parameter 'when' must be \"before\", \"after\" or "
             "\"both\", got ",
             it->dump());
      }
      when = it->get<std::string>();
    }
    before_ = when != "after";
    after_ = when != "before";
  }
  void before_pass(std::string_view pass, const ObjectPtr& ir) override {
    if (before_ && filter_.matches(pass)) record(pass, "before", ir);
  }
  void after_pass(std::string_view pass, const ObjectPtr& ir) override {
    if (after_ && filter_.matches(pass)) record(pass, "after", ir);
  }
  json results() const override { return dumps_; }

 private:
  void record(std::string_view pass, const char* when, const ObjectPtr& ir) {
    dumps_.push_back({{"pass", std::string(pass)}, {"when", when}, {"ir", print_graph(ir)}});
  }
  PassFilter filter_;
  bool before_ = false, after_ = true;
  json dumps_ = json::array();
};

/// "count_passes": how many passes ran, in total and per name.
class CountPasses final : public Instrument {
 public:
  explicit CountPasses(const json& params) { check_params("count_passes", params, {}); }
  void after_pass(std::string_view pass, const ObjectPtr&) override {
    ++total_;
    ++per_pass_[std::string(pass)];
  }
  json results() const override { return {{"total", total_}, {"per_pass", per_pass_}}; }

 private:
  int64_t total_ = 0;
  std::map<std::string, int64_t> per_pass_;
};

/// "skip_passes": skips the (non-required) passes a filter selects, to bisect a miscompile.
class SkipPasses final : public Instrument {
 public:
  explicit SkipPasses(const json& params) : filter_("skip_passes", params, nullptr) {
    check_params("skip_passes", params, {"filter"});
  }
  bool should_run(std::string_view pass) override {
    if (!filter_.matches(pass)) return true;
    skipped_.emplace_back(pass);
    return false;
  }
  json results() const override { return skipped_; }

 private:
  PassFilter filter_;
  std::vector<std::string> skipped_;
};

template <class T>
InstrumentFactory factory() {
  return
      [](const json& params) -> std::unique_ptr<Instrument> { return std::make_unique<T>(params); };
}

TT_REGISTER_INSTRUMENT("pass_names", "the names of the passes that ran, in order; no parameters",
                       factory<PassNames>());
TT_REGISTER_INSTRUMENT("pass_timing",
                       "[{pass, seconds}] wall time of each pass that ran; no parameters",
                       factory<PassTiming>());
TT_REGISTER_INSTRUMENT("print_ir",
                       "[{pass, when, ir}] printed IR; params: filter (glob or list, default "
                       "\"*\"), when (before|after|both, default after)",
                       factory<PrintIr>());
TT_REGISTER_INSTRUMENT("count_passes",
                       "{total, per_pass: {name: count}} of the passes that ran; no parameters",
                       factory<CountPasses>());
TT_REGISTER_INSTRUMENT("skip_passes",
                       "skips non-required passes matching filter (glob or list, required); "
                       "results: the skipped names",
                       factory<SkipPasses>());

}  // namespace
}  // namespace tensortune::ir
