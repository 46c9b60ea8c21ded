// The two error families are two types: a candidate boundary that catches
// UserError cannot swallow a bug.
#include "tensortune/support/error.h"

#include <gtest/gtest.h>

namespace tensortune {
namespace {

TEST(Error, UserErrorsAndBugsAreDifferentTypes) {
  EXPECT_THROW(fail(ErrorKind::kParse, "bad line"), UserError);
  EXPECT_THROW(TT_CHECK(false, kInvalidArgument, "bad value"), UserError);
  EXPECT_THROW(TT_ICHECK(false, "broken invariant"), InternalError);
  // A kInternal error reported from elsewhere (a worker) is rethrown as a bug.
  EXPECT_THROW(fail(ErrorKind::kInternal, "a worker's bug"), InternalError);
  // And nothing makes a bug look like bad input.
  EXPECT_THROW(UserError(ErrorKind::kInternal, "disguised"), InternalError);
  bool swallowed = false;
  try {
    try {
      TT_ICHECK(1 + 1 == 3, "arithmetic");
    } catch (const UserError&) {
      swallowed = true;
    }
  } catch (const InternalError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_NE(std::string(e.what()).find("this is a bug in tensortune"), std::string::npos);
  }
  EXPECT_FALSE(swallowed);
}

}  // namespace
}  // namespace tensortune
