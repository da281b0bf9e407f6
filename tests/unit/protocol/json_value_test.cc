#include "protocol/json_value.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace kc::protocol {
namespace {

TEST(JsonValue, DefaultIsNull) {
  EXPECT_TRUE(JsonValue().is_null());
  EXPECT_EQ(JsonValue().size(), 0u);
}

TEST(JsonValue, IntegersConvertOnlyInRange) {
  EXPECT_EQ(JsonValue::Integer(-5).AsInt64(), -5);
  EXPECT_FALSE(JsonValue::Integer(-5).AsUint64().has_value());
  EXPECT_EQ(JsonValue::Unsigned(std::numeric_limits<uint64_t>::max()).AsUint64(),
            std::numeric_limits<uint64_t>::max());
  JsonValue big = JsonValue::Number({"18446744073709551616", true});
  EXPECT_FALSE(big.AsUint64().has_value());
  EXPECT_DOUBLE_EQ(*big.AsDouble(), 18446744073709551616.0);
  EXPECT_FALSE(JsonValue::Number({"1.0", false}).AsInt64().has_value());
}

TEST(JsonValue, AsDoubleTellsOverflowFromUnderflow) {
  EXPECT_TRUE(std::isinf(*JsonValue::Number({"1e999", false}).AsDouble()));
  EXPECT_EQ(*JsonValue::Number({"1e-999", false}).AsDouble(), 0.0);
  EXPECT_FALSE(JsonValue::String("1").AsDouble().has_value());
}

TEST(JsonValue, DoubleKeepsAFractionOrExponent) {
  EXPECT_EQ(JsonValue::Double(3.0).number().text, "3.0");
  EXPECT_EQ(JsonValue::Double(0.1).number().text, "0.1");
  EXPECT_EQ(JsonValue::Double(1e21).number().text, "1e+21");
  EXPECT_FALSE(JsonValue::Double(2.0).is_integer());
}

TEST(JsonValue, ObjectFindAndAdd) {
  JsonValue object = JsonValue::Object();
  object.Add("a", JsonValue::Integer(1));
  object.Add("b", JsonValue::String("x"));
  EXPECT_EQ(object.size(), 2u);
  ASSERT_NE(object.Find("b"), nullptr);
  EXPECT_TRUE(object.Find("b")->IsString("x"));
  EXPECT_EQ(object.Find("c"), nullptr);
  EXPECT_EQ(JsonValue::Array().Find("a"), nullptr);
}

TEST(JsonValue, EqualityComparesStructureAndText) {
  JsonArray items;
  items.push_back(JsonValue::Integer(1));
  EXPECT_EQ(JsonValue::Array(items), JsonValue::Array(items));
  EXPECT_FALSE(JsonValue::Integer(1) == JsonValue::Double(1.0));
  EXPECT_FALSE(JsonValue() == JsonValue::Boolean(false));
}

}  // namespace
}  // namespace kc::protocol
