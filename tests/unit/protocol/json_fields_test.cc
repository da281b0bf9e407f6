#include "protocol/json_fields.h"

#include <gtest/gtest.h>

namespace kc::protocol {
namespace {

const nlohmann::json kObject = nlohmann::json::parse(
    R"({"name":"a","count":-3,"size":18446744073709551615,"ratio":0.5,"on":true,)"
    R"("paths":["/x","/y"],"headers":[["k","v"]]})");

TEST(JsonFields, RequiredFieldsAreReadByType) {
  JsonFields fields(kObject, "spec");
  std::string name;
  int64_t count = 0;
  uint64_t size = 0;
  double ratio = 0;
  bool on = false;
  std::vector<std::string> paths;
  std::vector<std::pair<std::string, std::string>> headers;
  ASSERT_TRUE(fields.Read("name", &name).ok());
  ASSERT_TRUE(fields.Read("count", &count).ok());
  ASSERT_TRUE(fields.Read("size", &size).ok());
  ASSERT_TRUE(fields.Read("ratio", &ratio).ok());
  ASSERT_TRUE(fields.Read("on", &on).ok());
  ASSERT_TRUE(fields.Read("paths", &paths).ok());
  ASSERT_TRUE(fields.Read("headers", &headers).ok());
  EXPECT_EQ(name, "a");
  EXPECT_EQ(count, -3);
  EXPECT_EQ(size, UINT64_MAX);
  EXPECT_EQ(ratio, 0.5);
  EXPECT_TRUE(on);
  EXPECT_EQ(paths, (std::vector<std::string>{"/x", "/y"}));
  EXPECT_EQ(headers, (std::vector<std::pair<std::string, std::string>>{{"k", "v"}}));
}

TEST(JsonFields, ErrorsNameTheObjectAndTheFieldWithTheChosenCode) {
  int64_t number = 0;
  const Status missing = JsonFields(kObject, "spec").Read("gone", &number);
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(missing.message(), "spec: field 'gone' is missing");
  const Status mistyped =
      JsonFields(kObject, "work message", StatusCode::kInternal).Read("name", &number);
  EXPECT_EQ(mistyped.code(), StatusCode::kInternal);
  EXPECT_EQ(mistyped.message(), "work message: field 'name' is not an integer");
  uint64_t size = 0;
  EXPECT_EQ(JsonFields(kObject, "spec").Read("count", &size).message(),
            "spec: field 'count' is not a non-negative integer");
  int small = 0;
  EXPECT_EQ(JsonFields(kObject, "spec").Read("size", &small).message(),
            "spec: field 'size' is not an integer");
  EXPECT_EQ(JsonFields(nlohmann::json::array(), "spec").IsObject().message(),
            "spec: not a JSON object");
}

TEST(JsonFields, OptionalFieldsAreEmptyOrKeepTheirDefaultWhenMissing) {
  JsonFields fields(kObject, "spec");
  std::optional<std::string> name, gone = "stale";
  ASSERT_TRUE(fields.Read("name", &name).ok());
  ASSERT_TRUE(fields.Read("gone", &gone).ok());
  EXPECT_EQ(name, "a");
  EXPECT_FALSE(gone.has_value());

  std::string kept = "default";
  ASSERT_TRUE(fields.ReadIfPresent("gone", &kept).ok());
  EXPECT_EQ(kept, "default");
  ASSERT_TRUE(fields.ReadIfPresent("name", &kept).ok());
  EXPECT_EQ(kept, "a");
  bool flag = false;
  EXPECT_EQ(fields.ReadIfPresent("paths", &flag).message(), "spec: field 'paths' is not a boolean");
}

}  // namespace
}  // namespace kc::protocol
