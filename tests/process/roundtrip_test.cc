// Values crossing a real process boundary: the tests spawn tensortune-worker
// (posix_spawn, through Subprocess), send it saved graphs over a pipe and check
// that what comes back is the same value, with its sharing intact.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/test_util.h"
#include "tensortune/ir/expr.h"
#include "tensortune/object/serialize.h"
#include "tensortune/object/structural.h"
#include "tensortune/support/subprocess.h"

namespace tensortune {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

/// Generous: a loaded CI machine must not make these flaky; a hang still ends.
constexpr auto kReplyTimeout = 60s;

Subprocess start_worker() { return Subprocess::spawn({TT_WORKER_PATH, "--roundtrip"}); }

/// Sends `request` to the worker and returns its reply as JSON.
json ask(Subprocess& worker, const std::string& request) {
  worker.write_frame(request, kReplyTimeout);
  auto reply = worker.read_frame(kReplyTimeout);
  if (!reply) {
    ADD_FAILURE() << "worker closed its stdout; stderr: " << worker.stderr_text();
    return json();
  }
  return parse_json_text(*reply, "worker reply");
}

struct Program {
  ir::Expr root;
  ir::Expr shared;  // used by both operands of the root
};

/// max(sum_k(s * k where k < 8) + s, s - sum_k(...)) with s = x*3 + y shared
/// and the reduction itself shared; `k_name` renames only the bound variable.
Program make_program(const std::string& k_name) {
  ir::Var x = ir::Var::make("x"), y = ir::Var::make("y");
  ir::IterVar k = ir::IterVar::make(k_name, 16, ir::IterKind::kReduce);
  ir::Expr s = x * 3 + y;
  ir::Expr r = ir::reduce(ir::ReduceOp::kSum, s * k.expr(), {k}, k.expr() < 8);
  return {ir::max(r + s, s - r), s};
}

TEST(WorkerRoundTrip, ExpressionDagComesBackEqualAndShared) {
  Program program = make_program("k");
  json sent = save_json(program.root);
  Subprocess worker = start_worker();
  json reply = ask(worker, sent.dump());
  ASSERT_FALSE(reply.contains("error")) << reply.dump();

  // Written once per node on the way back too: the worker kept the sharing.
  EXPECT_EQ(reply["nodes"].size(), sent["nodes"].size());
  ir::Expr back = load_json_as<ir::Expr>(reply);
  EXPECT_TRUE(structural_equal(program.root, back)) << *first_difference(program.root, back);
  EXPECT_EQ(structural_hash(program.root), structural_hash(back));
  EXPECT_FALSE(back.same_as(program.root));

  // The shared subexpression is one node after the round trip.
  auto top = back.as<ir::BinaryNode>();
  ASSERT_TRUE(top);
  auto left = top->a.as<ir::BinaryNode>();   // r + s
  auto right = top->b.as<ir::BinaryNode>();  // s - r
  ASSERT_TRUE(left && right);
  EXPECT_TRUE(left->b.same_as(right->a));  // s
  EXPECT_TRUE(left->a.same_as(right->b));  // r
  // The reduction's bound variable is the very variable its body uses.
  auto reduction = left->a.as<ir::ReduceNode>();
  ASSERT_TRUE(reduction);
  ASSERT_EQ(reduction->axis.size(), 1u);
  auto body = reduction->source.as<ir::BinaryNode>();
  ASSERT_TRUE(body);
  EXPECT_TRUE(body->b.same_as(reduction->axis[0]->var));

  // Bound variables compare up to renaming, across the boundary as well.
  EXPECT_TRUE(structural_equal(make_program("k_renamed").root, back));

  worker.close_stdin();
  ExitStatus status = worker.wait();
  EXPECT_TRUE(status.success()) << status.str() << "; stderr: " << worker.stderr_text();
  EXPECT_EQ(worker.stderr_text(), "");
}

TEST(WorkerRoundTrip, OneWorkerServesManyRequestsAndSurvivesBadOnes) {
  Subprocess worker = start_worker();
  Program a = make_program("k");
  json reply = ask(worker, save_string(a.root));
  EXPECT_TRUE(structural_equal(a.root, load_json_as<ir::Expr>(reply)));

  json unknown = save_json(a.root);
  unknown["nodes"][0]["type"] = "ir.NoSuchNode";
  reply = ask(worker, unknown.dump());
  ASSERT_TRUE(reply.contains("error")) << reply.dump();
  EXPECT_EQ(reply["kind"], "not found");
  EXPECT_NE(reply["error"].get<std::string>().find("ir.NoSuchNode"), std::string::npos);

  reply = ask(worker, "{not json");
  EXPECT_EQ(reply["kind"], "parse error");

  // Still serving after the bad requests; a null graph round-trips too.
  reply = ask(worker, save_string(ObjectPtr()));
  EXPECT_TRUE(reply["root"].is_null());
  reply = ask(worker, save_string(a.shared));
  EXPECT_TRUE(structural_equal(a.shared, load_json_as<ir::Expr>(reply)));

  worker.close_stdin();
  EXPECT_TRUE(worker.wait().success()) << worker.stderr_text();
}

TEST(WorkerRoundTrip, HostileRequestsAreErrorRepliesNotCrashes) {
  Subprocess worker = start_worker();
  // A million nested arrays in a field: printing or copying such a value
  // recurses once per level, so the parser must refuse it first.
  std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  json reply = ask(worker,
                   "{\"format\": \"tensortune.graph\", \"version\": 1, \"root\": 0, "
                   "\"nodes\": [{\"type\": \"ir.Var\", \"dtype\": " +
                       deep + ", \"name\": \"x\"}]}");
  EXPECT_EQ(reply["kind"], "parse error") << reply.dump();
  EXPECT_NE(reply["error"].get<std::string>().find("nested deeper than"), std::string::npos);
  // An error message quoting a cut-off multi-byte character is still valid JSON.
  std::string wide;
  for (int i = 0; i < 40; ++i) wide += "\xc3\xa9";  // é
  reply = ask(worker,
              "{\"format\": \"tensortune.graph\", \"version\": 1, \"root\": 0, "
              "\"nodes\": [{\"type\": \"ir.Var\", \"dtype\": \"int32\", "
              "\"name\": [\"x" +
                  wide + "\"]}]}");
  EXPECT_EQ(reply["kind"], "type mismatch") << reply.dump();
  EXPECT_NE(reply["error"].get<std::string>().find("[\"x\xc3\xa9"), std::string::npos);
  worker.close_stdin();
  EXPECT_TRUE(worker.wait().success()) << worker.stderr_text();
}

TEST(WorkerRoundTrip, TornFrameEndsTheWorkerWithAMessage) {
  Subprocess worker = start_worker();
  worker.write_all(std::string("\x10\0\0\0\0\0\0\0{}", 10), kReplyTimeout);
  worker.close_stdin();
  ExitStatus status = worker.wait();
  EXPECT_EQ(status.code, 1) << status.str();
  EXPECT_NE(worker.stderr_text().find("14 bytes missing"), std::string::npos)
      << worker.stderr_text();
}

TEST(WorkerRoundTrip, BadArgumentsExitWithUsage) {
  RunResult r = run_captured({TT_WORKER_PATH, "--no-such-mode"}, {}, kReplyTimeout);
  EXPECT_EQ(r.status.code, 2);
  EXPECT_NE(r.err.find("usage: tensortune-worker"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tensortune
