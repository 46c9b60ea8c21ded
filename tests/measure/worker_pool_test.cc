// The pool itself: recycling, bad requests, a worker program that is missing.
#include <gtest/gtest.h>

#include "measure/measure_test_util.h"
#include "tensortune/measure/protocol.h"
#include "tensortune/measure/worker_pool.h"

namespace tensortune::measure {
namespace {

using namespace testing;

TEST(WorkerPool, RecyclesWorkersAfterTheConfiguredNumberOfRequests) {
  te::Task task = small_task();
  LocalBuilder builder(builder_options(1));
  BuildResult built = builder.build(task, {schedule::State::make()})[0];
  ASSERT_EQ(built.error_code, ErrorCode::kNoError) << built.error_message;
  WorkerPoolOptions options = pool_options();
  options.max_requests_per_worker = 2;
  WorkerPool pool(options);
  std::vector<std::string> requests(5, make_run_request(task, built, RunnerOptions()));
  for (const auto& reply : pool.run(requests, std::chrono::seconds(10))) {
    ASSERT_EQ(reply.status, WorkerReply::Status::kOk) << reply.message;
    EXPECT_EQ(parse_run_reply(reply.payload).error_code, ErrorCode::kNoError);
  }
  EXPECT_EQ(pool.workers_started(), 3);  // 2 + 2 + 1 requests
}

TEST(WorkerPool, UnreadableRequestIsAnErrorReplyNotACrash) {
  WorkerPool pool(pool_options());
  auto replies = pool.run({"not json", R"({"type": "explode"})"}, std::chrono::seconds(10));
  ASSERT_EQ(replies[0].status, WorkerReply::Status::kOk);
  RunOutcome a = parse_run_reply(replies[0].payload), b = parse_run_reply(replies[1].payload);
  EXPECT_EQ(a.error_code, ErrorCode::kUnknownError);
  EXPECT_NE(b.error_message.find("unknown request type \"explode\""), std::string::npos) << b.error_message;
  EXPECT_EQ(pool.workers_started(), 1);
}

TEST(WorkerPool, MissingWorkerProgramIsDeviceLost) {
  WorkerPoolOptions options = pool_options();
  options.worker_path = "/nonexistent/tensortune-worker";
  WorkerPool pool(options);
  WorkerReply reply = pool.run({"{}"}, std::chrono::seconds(10))[0];
  EXPECT_EQ(reply.status, WorkerReply::Status::kLost);
  EXPECT_NE(reply.message.find("/nonexistent/tensortune-worker"), std::string::npos) << reply.message;
}

}  // namespace
}  // namespace tensortune::measure
