#include <gtest/gtest.h>

#include "server/execute/admitted_request.h"

namespace kc::server {
namespace {

protocol::Program Parse(const std::string& get_function_extra, const std::string& options = "{}") {
  const std::string json =
      R"({"instructions":[{"op":"upload","id":"m","kind":"module","source":"def f(): return 1"},)"
      R"({"op":"get_function","id":"f","module":{"$ref":"m"},"name":"f")" +
      get_function_extra +
      R"(},{"op":"run","id":"r","fn":{"$ref":"f"},"args":[]},)"
      R"({"op":"return","key":"out","value":{"$ref":"r"}}],"options":)" +
      options + "}";
  auto program = protocol::ParseProgram(json);
  EXPECT_TRUE(program.ok()) << program.status().message();
  return *program;
}

TEST(NeedsGpu, ARunOfACpuOnlyFunctionDoesNot) {
  EXPECT_FALSE(NeedsGpu(Parse(R"(,"cpu_only":true)")));
}

TEST(NeedsGpu, ARunOfAnyOtherFunctionMay) {
  EXPECT_TRUE(NeedsGpu(Parse("")));
}

TEST(NeedsGpu, AskingForGpusDoes) {
  EXPECT_TRUE(NeedsGpu(Parse(R"(,"cpu_only":true)", R"({"gpu_count":1})")));
}

}  // namespace
}  // namespace kc::server
