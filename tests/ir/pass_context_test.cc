// The PassContext: validation, save/load with working instruments, run_pass,
// and the per-thread stack of guards.
#include "tensortune/ir/pass_context.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "common/test_util.h"
#include "tensortune/ir/target.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"

namespace tensortune::ir {
namespace {

using json = nlohmann::json;
using Options = PassContextOptions;

// Fake passes work on a small IR value (a target): each adds one core.
ObjectPtr sample_ir(int64_t cores) {
  return ObjectPtr(Target::make("c", {{"num-cores", cores}}).ptr());
}

int64_t cores_of(const ObjectPtr& ir) {
  return std::static_pointer_cast<const TargetNode>(ir)->attr<int64_t>("num-cores");
}

ObjectPtr add_core(const ObjectPtr& ir) { return sample_ir(cores_of(ir) + 1); }

// A float option and a user instrument, registered outside the library the
// way a later layer (or a user's plugin compiled into the worker) would.
TT_REGISTER_CONFIG_OPTION("test.ratio", ConfigType::kFloat, 0.5, "a float option for tests");

std::atomic<int> g_exits{0};

class Recorder final : public Instrument {
 public:
  explicit Recorder(const json& params) : tag_(params.value("tag", "")) {
    if (params.contains("fail_enter") && params["fail_enter"] == true) fail_enter_ = true;
  }
  void enter_context() override {
    if (fail_enter_) fail(ErrorKind::kRuntime, "recorder refused to enter");
    events_.push_back("enter");
  }
  void exit_context() override { ++g_exits; }
  void before_pass(std::string_view pass, const ObjectPtr&) override {
    events_.push_back(tag_ + "before " + std::string(pass));
  }
  void after_pass(std::string_view pass, const ObjectPtr&) override {
    events_.push_back(tag_ + "after " + std::string(pass));
  }
  json results() const override { return events_; }

 private:
  std::string tag_;
  bool fail_enter_ = false;
  std::vector<std::string> events_;
};

// The message of the user error `body` throws (empty if none); for checks of
// lists that later layers extend, where only membership is stable.
template <class F>
std::string error_message(F&& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TT_REGISTER_INSTRUMENT("test_recorder", "records enter and passes; params: tag, fail_enter",
                       [](const json& params) { return std::make_unique<Recorder>(params); });

TEST(PassContext, SurvivesSaveLoadAndLoadedInstrumentsWork) {
  PassContext ctx = PassContext::make(Options()
                                          .with_opt_level(3)
                                          .with_config("tir.disable_vectorize", true)
                                          .with_config("tir.max_unroll_step", 8)
                                          .with_disabled("fold_constants")
                                          .with_instrument(InstrumentSpec::make("pass_names"))
                                          .with_instrument(InstrumentSpec::make("count_passes")));
  // Through text, as in a build request sent to a worker process.
  std::string text = save_string(ctx);
  PassContext loaded = load_json_as<PassContext>(parse_json_text(text));
  EXPECT_FALSE(loaded.same_as(ctx));
  EXPECT_TRUE(loaded == ctx);
  EXPECT_EQ(loaded.hash(), ctx.hash());
  EXPECT_EQ(save_string(loaded), text);
  EXPECT_EQ(loaded->opt_level, 3);
  EXPECT_TRUE(loaded->get_config<bool>("tir.disable_vectorize"));
  EXPECT_EQ(loaded->get_config<int64_t>("tir.max_unroll_step"), 8);
  EXPECT_FALSE(loaded->get_config<bool>("tir.disable_storage_rewrite"));  // the default
  ASSERT_EQ(loaded->instruments.size(), 2u);

  int fold_calls = 0;
  json results;
  {
    PassContextGuard guard(loaded);
    EXPECT_TRUE(PassContext::current().same_as(loaded));
    ObjectPtr ir = sample_ir(1);
    ir = run_pass("simplify", ir, add_core);
    ir = run_pass("fold_constants", ir, [&](const ObjectPtr& in) {
      ++fold_calls;
      return add_core(in);
    });
    ir = run_pass("unroll", ir, add_core, /*min_opt_level=*/3);
    EXPECT_EQ(cores_of(ir), 3);
    results = guard.instrument_results();
  }
  EXPECT_EQ(fold_calls, 0);
  EXPECT_EQ(results["pass_names"], json({"simplify", "unroll"}));
  EXPECT_EQ(results["count_passes"]["total"], 2);
  EXPECT_EQ(results["count_passes"]["per_pass"], json({{"simplify", 1}, {"unroll", 1}}));
  // What comes back is plain data.
  EXPECT_EQ(json::parse(results.dump()), results);
}

TEST(PassContext, LoadValidatesLikeMake) {
  json doc = save_json(PassContext::make(Options().with_config("tir.max_unroll_step", 4)));
  json bad = doc;
  bad["nodes"][doc["root"].get<size_t>()]["config"]["tir.nope"] = 1;
  EXPECT_TT_ERROR(load_json(bad), kNotFound,
                  "(ir.PassContext): unknown config option 'tir.nope'; known options: ");
  bad = doc;
  bad["nodes"][doc["root"].get<size_t>()]["config"]["tir.max_unroll_step"] = "four";
  EXPECT_TT_ERROR(load_json(bad), kTypeMismatch,
                  "config option 'tir.max_unroll_step' expects int, got string");
  bad = doc;
  bad["nodes"][doc["root"].get<size_t>()]["disabled_passes"] = {"b", "a"};
  EXPECT_TT_ERROR(load_json(bad), kInvalidArgument, "sorted without duplicates");
  bad = doc;
  bad["nodes"][doc["root"].get<size_t>()]["disabled_passes"] = {"a"};
  bad["nodes"][doc["root"].get<size_t>()]["required_passes"] = {"a"};
  EXPECT_TT_ERROR(load_json(bad), kInvalidArgument, "pass 'a' is both disabled and required");
  bad = doc;
  bad["nodes"][doc["root"].get<size_t>()]["opt_level"] = 7;
  EXPECT_TT_ERROR(load_json(bad), kInvalidArgument, "opt_level must be between 0 and 3, got 7");
}

TEST(PassContext, UnknownInstrumentInASavedContextIsRejected) {
  json doc =
      save_json(PassContext::make(Options().with_instrument(InstrumentSpec::make("pass_names"))));
  doc["nodes"][0]["name"] = "flame_graph";
  EXPECT_TT_ERROR(load_json(doc), kNotFound,
                  "node 0 (ir.InstrumentSpec): unknown instrument 'flame_graph'; registered "
                  "instruments: ");
  doc["nodes"][0]["name"] = "print_ir";
  doc["nodes"][0]["params"] = {{"when", "during"}};
  EXPECT_TT_ERROR(load_json(doc), kInvalidArgument, "parameter 'when' must be");
}

TEST(PassContext, ConfigErrorsListKnownOptions) {
  EXPECT_TT_ERROR(PassContext::make(Options().with_config("tir.unroll", 4)), kNotFound,
                  "unknown config option 'tir.unroll'; known options: ");
  EXPECT_TT_ERROR(PassContext::make(Options().with_config("tir.disable_vectorize", 1)),
                  kTypeMismatch,
                  "config option 'tir.disable_vectorize' expects bool, got number 1; known "
                  "options: ");
  // Later layers add options, so check membership rather than the whole list.
  for (const json& config : {json{{"tir.unroll", 4}}, json{{"tir.disable_vectorize", 1}}}) {
    Options options;
    options.config = config;
    std::string message = error_message([&] { PassContext::make(options); });
    for (const char* option : {"test.ratio (float)", "testing.inject_fault (string)",
                               "tir.disable_storage_rewrite (bool)", "tir.disable_vectorize (bool)",
                               "tir.max_unroll_step (int)"}) {
      EXPECT_NE(message.find(option), std::string::npos) << option << " not in: " << message;
    }
  }
  EXPECT_TT_ERROR(PassContext::make(Options().with_config("testing.inject_fault", "explode")),
                  kInvalidArgument,
                  "config option 'testing.inject_fault' must be one of \"\", \"segv\", \"abort\"");
  Options not_an_object;
  not_an_object.config = json::array();
  EXPECT_TT_ERROR(PassContext::make(not_an_object), kTypeMismatch, "config must be a JSON object");
  EXPECT_TT_ERROR(PassContext::make(Options().with_opt_level(-1)), kInvalidArgument, "opt_level");
  EXPECT_TT_ERROR(PassContext::current()->get_config<bool>("tir.nope"), kNotFound,
                  "unknown config option 'tir.nope'");
  EXPECT_TT_ERROR(PassContext::current()->get_config<int64_t>("tir.disable_vectorize"),
                  kTypeMismatch, "'tir.disable_vectorize' is a bool, not a int");
}

TEST(PassContext, ConfigValuesAndDefaults) {
  PassContext def = PassContext::current();
  EXPECT_EQ(def->opt_level, 2);
  EXPECT_FALSE(def->get_config<bool>("tir.disable_vectorize"));
  EXPECT_EQ(def->get_config<int64_t>("tir.max_unroll_step"), 64);
  EXPECT_EQ(def->get_config<std::string>("testing.inject_fault"), "");
  EXPECT_EQ(def->get_config<double>("test.ratio"), 0.5);
  // An int written for a float option is stored as a float, so the context
  // equals (and hashes like) the one written with 2.0, also after loading.
  PassContext a = PassContext::make(Options().with_config("test.ratio", 2));
  PassContext b = PassContext::make(Options().with_config("test.ratio", 2.0));
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a->get_config<double>("test.ratio"), 2.0);
  EXPECT_TRUE(load_json_as<PassContext>(parse_json_text(save_string(a))) == b);
  PassContext fault = PassContext::make(Options().with_config("testing.inject_fault", "segv"));
  EXPECT_EQ(fault->get_config<std::string>("testing.inject_fault"), "segv");
  // Pass lists are sets.
  EXPECT_TRUE(PassContext::make(Options().with_disabled("b").with_disabled("a").with_disabled(
                  "b")) == PassContext::make(Options().with_disabled("a").with_disabled("b")));
  EXPECT_FALSE(PassContext::make(Options().with_opt_level(1)) == def);
  EXPECT_NE(PassContext::make(Options().with_opt_level(1)).hash(), def.hash());
}

TEST(PassContext, RequiredAndDisabledConflict) {
  EXPECT_TT_ERROR(
      PassContext::make(
          Options().with_disabled("lower").with_disabled("unroll").with_required("unroll")),
      kInvalidArgument, "pass 'unroll' is both disabled and required");
  EXPECT_TT_ERROR(PassContext::make(Options().with_disabled("")), kInvalidArgument,
                  "a pass name must not be empty");
}

TEST(PassContext, RequiredPassesIgnoreOptLevelAndInstruments) {
  PassContext ctx = PassContext::make(
      Options()
          .with_opt_level(0)
          .with_required("legalize")
          .with_instrument(InstrumentSpec::make("skip_passes", {{"filter", {"leg*", "vector?ze"}}}))
          .with_instrument(InstrumentSpec::make("pass_names")));
  PassContextGuard guard(ctx);
  ObjectPtr ir = sample_ir(1);
  ir = run_pass("legalize", ir, add_core, /*min_opt_level=*/2);  // required: runs
  ir = run_pass("vectorize", ir, add_core);                      // skipped by the instrument
  ir = run_pass("simplify", ir, add_core, /*min_opt_level=*/1);  // skipped: opt_level 0
  ir = run_pass("lower", ir, add_core);                          // runs
  EXPECT_EQ(cores_of(ir), 3);
  json results = guard.instrument_results();
  EXPECT_EQ(results["pass_names"], json({"legalize", "lower"}));
  EXPECT_EQ(results["skip_passes"], json({"vectorize"}));
}

TEST(PassContext, InstrumentsSeeEveryPhase) {
  PassContext ctx = PassContext::make(
      Options()
          .with_instrument(
              InstrumentSpec::make("print_ir", {{"filter", "lower_*"}, {"when", "both"}}))
          .with_instrument(InstrumentSpec::make("pass_timing"))
          .with_instrument(InstrumentSpec::make("test_recorder", {{"tag", "r:"}})));
  int exits_before = g_exits;
  ObjectPtr in = sample_ir(4), out;
  json results;
  {
    PassContextGuard guard(ctx);
    // Typed IR goes through the template overload.
    Target typed = run_pass("outer", Target::parse("c -num-cores=4"), [](const Target& t) {
      // A pass may run passes of its own.
      return Target(std::static_pointer_cast<const TargetNode>(
          run_pass("lower_inner", ObjectPtr(t.ptr()), add_core)));
    });
    EXPECT_EQ(typed->attr<int64_t>("num-cores"), 5);
    out = run_pass("lower_loops", in, add_core);
    EXPECT_EQ(g_exits, exits_before);
    results = guard.instrument_results();
  }
  EXPECT_EQ(g_exits, exits_before + 1);
  EXPECT_EQ(results["test_recorder"],
            json({"enter", "r:before outer", "r:before lower_inner", "r:after lower_inner",
                  "r:after outer", "r:before lower_loops", "r:after lower_loops"}));
  const json& dumps = results["print_ir"];
  ASSERT_EQ(dumps.size(), 4u) << dumps.dump(2);
  EXPECT_EQ(dumps[2], json({{"pass", "lower_loops"}, {"when", "before"}, {"ir", print_graph(in)}}));
  EXPECT_EQ(dumps[3], json({{"pass", "lower_loops"}, {"when", "after"}, {"ir", print_graph(out)}}));
  EXPECT_NE(dumps[3]["ir"].get<std::string>().find("\"num-cores\":5"), std::string::npos)
      << dumps[3]["ir"];
  const json& timing = results["pass_timing"];
  ASSERT_EQ(timing.size(), 3u);
  EXPECT_EQ(timing[0]["pass"], "lower_inner");  // in the order the passes finished
  EXPECT_EQ(timing[1]["pass"], "outer");
  EXPECT_EQ(timing[2]["pass"], "lower_loops");
  EXPECT_GE(timing[1]["seconds"].get<double>(), timing[0]["seconds"].get<double>());
}

TEST(PassContext, AFailingPassLeavesInstrumentsConsistent) {
  PassContext ctx = PassContext::make(Options()
                                          .with_instrument(InstrumentSpec::make("pass_timing"))
                                          .with_instrument(InstrumentSpec::make("pass_names")));
  PassContextGuard guard(ctx);
  ObjectPtr out = run_pass("outer", sample_ir(1), [](const ObjectPtr& in) {
    EXPECT_TT_ERROR(
        run_pass("broken", in,
                 [](const ObjectPtr&) -> ObjectPtr { fail(ErrorKind::kRuntime, "broken pass"); }),
        kRuntime, "broken pass");
    return add_core(in);
  });
  EXPECT_EQ(cores_of(out), 2);
  json results = guard.instrument_results();
  EXPECT_EQ(results["pass_names"], json({"outer"}));
  ASSERT_EQ(results["pass_timing"].size(), 1u);
  EXPECT_EQ(results["pass_timing"][0]["pass"], "outer");
}

TEST(PassContext, InstrumentSpecErrors) {
  EXPECT_TT_ERROR(InstrumentSpec::make("flame_graph"), kNotFound,
                  "unknown instrument 'flame_graph'; registered instruments: ");
  std::string message = error_message([] { InstrumentSpec::make("flame_graph"); });
  for (const char* name :
       {"count_passes", "pass_names", "pass_timing", "print_ir", "skip_passes", "test_recorder"}) {
    EXPECT_NE(message.find(name), std::string::npos) << name << " not in: " << message;
  }
  EXPECT_TT_ERROR(InstrumentSpec::make("pass_names", {{"verbose", true}}), kInvalidArgument,
                  "instrument 'pass_names': unknown parameter 'verbose'; parameters: (none)");
  EXPECT_TT_ERROR(InstrumentSpec::make("print_ir", {{"filter", 3}}), kTypeMismatch,
                  "parameter 'filter' must be a glob or a list of globs, got 3");
  EXPECT_TT_ERROR(InstrumentSpec::make("print_ir", {{"filters", "*"}}), kInvalidArgument,
                  "unknown parameter 'filters'; parameters: filter, when");
  EXPECT_TT_ERROR(InstrumentSpec::make("skip_passes"), kInvalidArgument,
                  "parameter 'filter' (a glob or list of globs over pass names) is required");
  EXPECT_TT_ERROR(InstrumentSpec::make("pass_names", json::array()), kTypeMismatch,
                  "params must be a JSON object");
  EXPECT_TT_ERROR(PassContext::make(Options()
                                        .with_instrument(InstrumentSpec::make("pass_names"))
                                        .with_instrument(InstrumentSpec::make("pass_names"))),
                  kInvalidArgument, "instrument 'pass_names' is listed twice");
}

TEST(PassContext, FailedEnterLeavesNothingInForce) {
  PassContext ctx = PassContext::make(Options()
                                          .with_opt_level(1)
                                          .with_instrument(InstrumentSpec::make("test_recorder"))
                                          .with_instrument(InstrumentSpec::make("print_ir")));
  PassContext bad = PassContext::make(
      Options()
          .with_opt_level(1)
          .with_instrument(InstrumentSpec::make("pass_names"))
          .with_instrument(InstrumentSpec::make("test_recorder", {{"fail_enter", true}})));
  int exits_before = g_exits;
  EXPECT_TT_ERROR(PassContextGuard guard(bad), kRuntime, "recorder refused to enter");
  EXPECT_EQ(g_exits, exits_before);  // the failing one never entered
  EXPECT_EQ(PassContext::current()->opt_level, 2);
  {
    PassContextGuard guard(ctx);
    EXPECT_EQ(PassContext::current()->opt_level, 1);
  }
  EXPECT_EQ(g_exits, exits_before + 1);
  EXPECT_EQ(PassContext::current()->opt_level, 2);
}

TEST(PassContext, NestedGuardsRestoreTheOuterContext) {
  PassContext outer = PassContext::make(
      Options().with_opt_level(1).with_instrument(InstrumentSpec::make("pass_names")));
  PassContext inner = PassContext::make(Options().with_opt_level(3).with_disabled("simplify"));
  EXPECT_TRUE(PassContext::current() == PassContext::make());
  {
    PassContextGuard outer_guard(outer);
    EXPECT_TRUE(PassContext::current().same_as(outer));
    {
      PassContextGuard inner_guard(inner);
      EXPECT_TRUE(PassContext::current().same_as(inner));
      // Only the innermost context is in force: its disabled pass is skipped,
      // and the outer context's instruments do not see the inner passes.
      EXPECT_EQ(cores_of(run_pass("simplify", sample_ir(1), add_core)), 1);
      EXPECT_EQ(cores_of(run_pass("inner_pass", sample_ir(1), add_core)), 2);
    }
    EXPECT_TRUE(PassContext::current().same_as(outer));
    EXPECT_EQ(cores_of(run_pass("simplify", sample_ir(1), add_core)), 2);
    EXPECT_EQ(outer_guard.instrument_results()["pass_names"], json({"simplify"}));
  }
  EXPECT_TRUE(PassContext::current() == PassContext::make());
  EXPECT_EQ(PassContext::current()->opt_level, 2);
}

TEST(PassContext, EachThreadHasItsOwnCurrentContext) {
  PassContext ctx = PassContext::make(Options()
                                          .with_opt_level(0)
                                          .with_disabled("simplify")
                                          .with_instrument(InstrumentSpec::make("pass_names")));
  PassContextGuard guard(ctx);
  int64_t seen_opt_level = -1, seen_cores = -1;
  bool seen_default = false;
  std::thread other([&] {
    PassContext current = PassContext::current();
    seen_opt_level = current->opt_level;
    seen_default = current == PassContext::make();
    seen_cores = cores_of(run_pass("simplify", sample_ir(1), add_core));
  });
  other.join();
  EXPECT_EQ(seen_opt_level, 2);
  EXPECT_TRUE(seen_default);
  EXPECT_EQ(seen_cores, 2);  // not disabled over there
  EXPECT_TRUE(PassContext::current().same_as(ctx));
  EXPECT_EQ(guard.instrument_results()["pass_names"], json::array());
}

}  // namespace
}  // namespace tensortune::ir
