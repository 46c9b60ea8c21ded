// testing.inject_fault plants its fault in the generated C. The faults that
// would kill this process (segv, abort, fpe, hang, oom) are run through real
// workers in tests/measure; here each is checked in the source, and the two
// that are safe in-process are compiled and run.
#include <gtest/gtest.h>

#include "codegen/codegen_test_util.h"
#include "common/test_util.h"
#include "tensortune/codegen/backend.h"
#include "tensortune/codegen/c_codegen.h"
#include "tensortune/codegen/module.h"
#include "tensortune/ir/pass_context.h"
#include "tensortune/te/ndarray.h"

namespace tensortune::codegen {
namespace {

using ir::DataType;
using ir::Var;
using lower::Buffer;
using lower::PrimFunc;

// B[i] = A[i] * 2 over 8 elements.
PrimFunc doubler() {
  Buffer a = Buffer::make("A", DataType::float32(), {8}),
         b = Buffer::make("B", DataType::float32(), {8});
  Var i = Var::make("i");
  return PrimFunc::make("doubler", {a, b}, 1,
                        lower::for_loop(i, 0, 8, lower::ForKind::kSerial,
                                        lower::buffer_store(b, i, ir::buffer_load(a, i) * 2.0f)));
}

ir::PassContext with_fault(const std::string& fault) {
  return ir::PassContext::make(ir::PassContextOptions().with_config("testing.inject_fault", fault));
}

TEST(FaultInjection, EveryFaultIsPlantedInTheExportedFunction) {
  ir::Target target = ir::Target::parse("c");
  std::string clean = generate_c({doubler()}, target);
  // The statement each fault plants (the fault's name alone would also match the comment).
  const std::pair<const char*, const char*> planted[] = {
      {"segv", "*(volatile int*)address = 1;"},
      {"abort", "  abort();"},
      {"fpe", "quotient = one / zero;"},
      {"hang", "for (volatile int spin = 1; spin;)"},
      {"oom", "malloc((size_t)64 << 20)"},
      {"compile_error", "#error \"injected fault: compile_error\""},
      {"wrong_answer", "+ 1.0 + fabs((double)"},
  };
  for (const auto& [fault, statement] : planted) {
    ir::PassContextGuard guard(with_fault(fault));
    std::string source = generate_c({doubler()}, target);
    EXPECT_EQ(clean.find(statement), std::string::npos) << fault;
    EXPECT_NE(source.find(statement), std::string::npos) << fault << ":\n" << source;
  }
}

TEST(FaultInjection, CompileErrorFailsTheBuild) {
  ir::PassContextGuard guard(with_fault("compile_error"));
  EXPECT_TT_ERROR(build_module({doubler()}, ir::Target::parse("c"), testing::test_options()),
                  kRuntime, "injected fault: compile_error");
}

TEST(FaultInjection, WrongAnswerChangesTheFirstOutput) {
  Module m;
  {
    ir::PassContextGuard guard(with_fault("wrong_answer"));
    m = build_module({doubler()}, ir::Target::parse("c"), testing::test_options());
  }
  te::NDArray a(DataType::float32(), {8}), b(DataType::float32(), {8});
  for (int i = 0; i < 8; ++i) static_cast<float*>(a.data())[i] = static_cast<float>(i) - 3.0f;
  void* args[] = {a.data(), b.data()};
  ASSERT_EQ(m.get("doubler")(args), 0);
  const float* out = static_cast<const float*>(b.data());
  EXPECT_NE(out[0], -6.0f);
  for (int i = 1; i < 8; ++i) EXPECT_EQ(out[i], 2.0f * (static_cast<float>(i) - 3.0f));
}

}  // namespace
}  // namespace tensortune::codegen
