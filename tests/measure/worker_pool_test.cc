// The pool itself: recycling, bad requests, a worker program that is missing.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "measure/measure_test_util.h"
#include "tensortune/codegen/module.h"
#include "tensortune/measure/protocol.h"
#include "tensortune/measure/worker_pool.h"

namespace tensortune::measure {
namespace {

using namespace testing;

TEST(WorkerPool, RecyclesWorkersAfterTheConfiguredNumberOfRequests) {
  te::Task task = small_task();
  LocalBuilder builder(builder_options(1));
  BuildResult built = builder.build(task, {schedule::State::make()}, ir::PassContext::make())[0];
  ASSERT_EQ(built.error_code, ErrorCode::kNoError) << built.error_message;
  WorkerPoolOptions options = pool_options();
  options.max_requests_per_worker = 2;
  WorkerPool pool(options, hello_handshake());
  std::vector<std::string> requests(5, run_request(task, built));
  for (const auto& reply : pool.run(requests, std::chrono::seconds(10))) {
    ASSERT_EQ(reply.status, WorkerReply::Status::kOk) << reply.message;
    EXPECT_EQ(decode<RunOutcome>(reply.payload, "run reply").error_code, ErrorCode::kNoError);
  }
  EXPECT_EQ(pool.workers_started(), 3);  // 2 + 2 + 1 requests
}

TEST(WorkerPool, UnreadableRequestIsAnErrorReplyNotACrash) {
  WorkerPool pool(pool_options());
  auto replies = pool.run({"not json", encode(WorkerInfo()), R"({"type": "explode"})"},
                          std::chrono::seconds(10));
  for (const auto& reply : replies)
    ASSERT_EQ(reply.status, WorkerReply::Status::kOk) << reply.message;
  EXPECT_TT_ERROR(decode<RunOutcome>(replies[0].payload, "reply"), kRuntime,
                  "the worker refused the request (parse error)");
  EXPECT_TT_ERROR(decode<RunOutcome>(replies[1].payload, "reply"), kRuntime,
                  "a measure.WorkerInfo is not a request");
  EXPECT_TT_ERROR(decode<RunOutcome>(replies[2].payload, "reply"), kRuntime, "saved graph");
  EXPECT_EQ(pool.workers_started(), 1);
}

TEST(WorkerPool, MissingWorkerProgramIsReportedAsNotStarted) {
  WorkerPoolOptions options = pool_options();
  options.worker_path = "/nonexistent/tensortune-worker";
  WorkerPool pool(options, hello_handshake());
  WorkerReply reply = pool.run({"{}"}, std::chrono::seconds(10))[0];
  EXPECT_EQ(reply.status, WorkerReply::Status::kNotStarted);
  EXPECT_NE(reply.message.find("/nonexistent/tensortune-worker"), std::string::npos)
      << reply.message;
}

TEST(WorkerPool, BuilderAndRunnerStopWhenTheWorkerCannotStart) {
  // Not a result of the candidates: recording them all as failed would burn
  // the trial budget and make a resumed run skip them.
  LocalBuilderOptions build = builder_options(1);
  build.pool.worker_path = "/nonexistent/tensortune-worker";
  LocalBuilder builder(build);
  EXPECT_TT_ERROR(builder.build(small_task(), {schedule::State::make()}, ir::PassContext::make()),
                  kRuntime, "cannot start build worker '/nonexistent/tensortune-worker'");
}

TEST(WorkerPool, StrayPrintsOfAKernelDoNotBreakTheProtocol) {
  // The worker's fd 1 is stderr and frames go elsewhere: a kernel that
  // writes to stdout still gets a proper reply.
  const char* source =
      "#include <stdio.h>\n#include <stdint.h>\n"
      "int32_t noisy(void** args) { puts(\"hello from the kernel\"); fflush(stdout); (void)args; "
      "return 0; }\n";
  codegen::ModuleOptions module_options;
  module_options.cache_dir = test_cache_dir();
  codegen::Module m =
      codegen::Module::compile(source, {"cc"}, {"-shared", "-fPIC"}, module_options);
  BuildResult built;
  built.library = m.library_path();
  built.library_sha256 = m.sha256();
  built.function = "noisy";
  WorkerPool pool(pool_options());
  auto replies = pool.run({run_request(small_task(), built)}, std::chrono::seconds(10));
  ASSERT_EQ(replies[0].status, WorkerReply::Status::kOk) << replies[0].message;
  RunOutcome out = decode<RunOutcome>(replies[0].payload, "run reply");
  EXPECT_EQ(out.error_code, ErrorCode::kNoError) << out.error_message;
  EXPECT_EQ(out.costs.size(), 3u);
}

}  // namespace
}  // namespace tensortune::measure
