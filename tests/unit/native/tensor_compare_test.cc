#include "native/tensor_compare.h"

#include <numeric>
#include <vector>

#include <gtest/gtest.h>

namespace kc::native {
namespace {

TensorView View(const std::vector<float>& data, std::vector<int64_t> shape,
                std::vector<int64_t> strides = {}) {
  TensorView view;
  view.data = reinterpret_cast<const std::byte*>(data.data());
  view.dtype = DType::kFloat32;
  view.shape = std::move(shape);
  view.strides = std::move(strides);
  return view;
}

StatusOr<CloseResult> CompareHost(const TensorView& a, const TensorView& e,
                                  Tolerance tolerance = {0, 0},
                                  int64_t chunk_bytes = kCompareChunkBytes) {
  HostElementSource actual(a), expected(e);
  return CompareTensors(actual, expected, tolerance, chunk_bytes);
}

TEST(LayoutMismatch, ShapesAndDtypesMustBeEqual) {
  std::vector<float> data(4);
  EXPECT_EQ(LayoutMismatch(View(data, {4}), View(data, {4})), "");
  // A [1] actual broadcasts against [4] in torch.allclose; here it is a mismatch (§2.3 gap).
  EXPECT_EQ(LayoutMismatch(View(data, {1}), View(data, {4})),
            "shape mismatch: actual [1] vs expected [4]");
  EXPECT_EQ(LayoutMismatch(View(data, {4}), View(data, {2, 2})),
            "shape mismatch: actual [4] vs expected [2, 2]");
  TensorView doubles = View(data, {2});
  doubles.dtype = DType::kFloat64;
  EXPECT_EQ(LayoutMismatch(View(data, {2}), doubles),
            "dtype mismatch: actual float32 vs expected float64");
}

TEST(CompareTensors, LayoutMismatchIsAFailedResultNotAnError) {
  std::vector<float> data(4);
  StatusOr<CloseResult> result = CompareHost(View(data, {4}), View(data, {2, 2}));
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->passed);
  EXPECT_EQ(result->total, 0);
  EXPECT_EQ(result->mismatched, 0);
  EXPECT_EQ(ToJson(*result)["reason"], "shape mismatch: actual [4] vs expected [2, 2]");
}

TEST(CompareTensors, StridedHostTensorIsReadInIndexOrder) {
  // storage holds a 3x2 row-major matrix; its transpose is the 2x3 view with strides {1, 2}.
  std::vector<float> storage = {0, 1, 2, 3, 4, 5};
  std::vector<float> transposed = {0, 2, 4, 1, 3, 5};
  StatusOr<CloseResult> equal =
      CompareHost(View(storage, {2, 3}, {1, 2}), View(transposed, {2, 3}));
  ASSERT_TRUE(equal.ok());
  EXPECT_TRUE(equal->passed);
  EXPECT_EQ(equal->total, 6);

  transposed[4] = 30;  // logical [1, 1]
  StatusOr<CloseResult> differs =
      CompareHost(View(storage, {2, 3}, {1, 2}), View(transposed, {2, 3}), {0, 0}, 8);
  ASSERT_TRUE(differs.ok());
  EXPECT_EQ(differs->mismatched, 1);
  EXPECT_EQ(differs->first_mismatch, std::optional<int64_t>(4));
  EXPECT_EQ(ToJson(*differs)["first_mismatch"], nlohmann::json::array({1, 1}));
  EXPECT_DOUBLE_EQ(differs->max_abs_err, 27);
}

TEST(CompareTensors, NegativeAndZeroStrides) {
  std::vector<float> storage = {1, 2, 3, 4};
  std::vector<float> reversed = {4, 3, 2, 1};
  TensorView backwards = View(storage, {4}, {-1});
  backwards.data = reinterpret_cast<const std::byte*>(storage.data() + 3);
  StatusOr<CloseResult> result = CompareHost(backwards, View(reversed, {4}));
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->passed);

  std::vector<float> ones = {7, 7, 7};  // a broadcast (expanded) view: stride 0
  StatusOr<CloseResult> expanded = CompareHost(View(storage, {3}, {0}), View(ones, {3}));
  ASSERT_TRUE(expanded.ok());
  EXPECT_EQ(expanded->mismatched, 3);
}

TEST(CompareTensors, SmallChunksGiveTheSameAnswer) {
  std::vector<float> expected(1000);
  std::iota(expected.begin(), expected.end(), 0.0f);
  std::vector<float> actual = expected;
  for (int i : {5, 333, 334, 999})
    actual[i] += 1;
  for (int64_t chunk_bytes : {int64_t{4}, int64_t{12}, int64_t{400}, kCompareChunkBytes}) {
    StatusOr<CloseResult> result =
        CompareHost(View(actual, {10, 100}), View(expected, {10, 100}), {0, 0}, chunk_bytes);
    ASSERT_TRUE(result.ok());
    EXPECT_EQ(result->mismatched, 4) << chunk_bytes;
    EXPECT_EQ(result->total, 1000);
    EXPECT_EQ(result->first_mismatch, std::optional<int64_t>(5));
    EXPECT_DOUBLE_EQ(result->max_abs_err, 1);
  }
  // The strided path, chunks crossing rows: a 100x10 transpose of the same storage.
  std::vector<float> transposed_expected(1000);
  for (int r = 0; r < 100; ++r) {
    for (int c = 0; c < 10; ++c)
      transposed_expected[r * 10 + c] = expected[c * 100 + r];
  }
  StatusOr<CloseResult> strided = CompareHost(View(actual, {100, 10}, {1, 100}),
                                              View(transposed_expected, {100, 10}), {0, 0}, 28);
  ASSERT_TRUE(strided.ok());
  EXPECT_EQ(strided->mismatched, 4);
  EXPECT_EQ(strided->first_mismatch, std::optional<int64_t>(50));  // actual[5] is [5, 0]
}

TEST(CompareTensors, EmptyAndZeroDimensionalTensors) {
  std::vector<float> none;
  StatusOr<CloseResult> empty = CompareHost(View(none, {0, 3}), View(none, {0, 3}));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->passed);
  EXPECT_EQ(empty->total, 0);

  std::vector<float> a = {1}, e = {2};
  StatusOr<CloseResult> scalar = CompareHost(View(a, {}), View(e, {}));
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->total, 1);
  EXPECT_EQ(scalar->mismatched, 1);
  EXPECT_EQ(ToJson(*scalar)["first_mismatch"], nlohmann::json::array());
}

TEST(CompareTensors, BadToleranceIsInvalidArgument) {
  std::vector<float> data(1);
  EXPECT_EQ(CompareHost(View(data, {1}), View(data, {1}), {-1, 0}).status().code(),
            StatusCode::kInvalidArgument);
}

class FailingSource final : public ElementSource {
 public:
  explicit FailingSource(TensorView view) : view_(std::move(view)) {}
  const TensorView& view() const override { return view_; }
  bool NeedsStaging() const override { return true; }
  StatusOr<const std::byte*> Read(int64_t, int64_t, std::byte*) override {
    return FailedPreconditionError("cudaErrorIllegalAddress: an illegal memory access");
  }

 private:
  TensorView view_;
};

TEST(CompareTensors, ReadErrorsArePassedOn) {
  std::vector<float> data(4);
  FailingSource actual(View(data, {4}));
  HostElementSource expected(View(data, {4}));
  StatusOr<CloseResult> result = CompareTensors(actual, expected, {});
  EXPECT_EQ(result.status().code(), StatusCode::kFailedPrecondition);
}

TEST(TensorView, CompactIgnoresStridesOfUnitExtents) {
  std::vector<float> data(6);
  EXPECT_TRUE(View(data, {2, 3}).IsCompact());
  EXPECT_TRUE(View(data, {2, 3}, {3, 1}).IsCompact());
  EXPECT_TRUE(View(data, {2, 1, 3}, {3, 99, 1}).IsCompact());
  EXPECT_FALSE(View(data, {2, 3}, {1, 2}).IsCompact());
  EXPECT_FALSE(View(data, {3}, {2}).IsCompact());
}

}  // namespace
}  // namespace kc::native
