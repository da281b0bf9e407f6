#include "native/dlpack_export.h"

#include <gtest/gtest.h>

namespace kc::native {
namespace {

int g_legacy_deletes = 0;
int g_versioned_deletes = 0;

// A producer's export: the shape and strides live beside the managed tensor, as torch's do.
struct LegacyExport {
  DLManagedTensor managed{};
  int64_t shape[2] = {2, 3};
  int64_t strides[2] = {1, 2};
  float data[6] = {};
};

LegacyExport* MakeLegacy(DLDataType dtype, DLDevice device) {
  auto* exported = new LegacyExport;
  DLTensor& tensor = exported->managed.dl_tensor;
  tensor.data = exported->data;
  tensor.device = device;
  tensor.ndim = 2;
  tensor.dtype = dtype;
  tensor.shape = exported->shape;
  tensor.strides = exported->strides;
  tensor.byte_offset = 4;
  exported->managed.manager_ctx = exported;
  exported->managed.deleter = [](DLManagedTensor* self) {
    ++g_legacy_deletes;
    delete static_cast<LegacyExport*>(self->manager_ctx);
  };
  return exported;
}

constexpr DLDataType kFloat32{kDLFloat, 32, 1};
constexpr DLDevice kCpu{kDLCPU, 0};

TEST(DTypeFromDlpack, MapsTheSupportedTypes) {
  struct Case {
    DLDataType type;
    DType dtype;
  };
  for (Case c : {Case{{kDLBool, 8, 1}, DType::kBool}, Case{{kDLUInt, 8, 1}, DType::kUInt8},
                 Case{{kDLUInt, 64, 1}, DType::kUInt64}, Case{{kDLInt, 8, 1}, DType::kInt8},
                 Case{{kDLInt, 16, 1}, DType::kInt16}, Case{{kDLInt, 32, 1}, DType::kInt32},
                 Case{{kDLInt, 64, 1}, DType::kInt64}, Case{{kDLFloat, 16, 1}, DType::kFloat16},
                 Case{{kDLBfloat, 16, 1}, DType::kBFloat16},
                 Case{{kDLFloat, 32, 1}, DType::kFloat32}, Case{{kDLFloat, 64, 1}, DType::kFloat64},
                 Case{{kDLFloat8_e4m3fn, 8, 1}, DType::kFloat8E4M3Fn},
                 Case{{kDLFloat8_e5m2, 8, 1}, DType::kFloat8E5M2}}) {
    StatusOr<DType> dtype = DTypeFromDlpack(c.type);
    ASSERT_TRUE(dtype.ok()) << int(c.type.code) << "/" << int(c.type.bits);
    EXPECT_EQ(*dtype, c.dtype);
  }
}

TEST(DTypeFromDlpack, RefusesTheRest) {
  for (DLDataType type :
       {DLDataType{kDLComplex, 64, 1}, DLDataType{kDLFloat, 32, 4}, DLDataType{kDLFloat, 8, 1},
        DLDataType{kDLUInt, 1, 1}, DLDataType{kDLOpaqueHandle, 64, 1},
        DLDataType{kDLFloat8_e8m0fnu, 8, 1}}) {
    EXPECT_EQ(DTypeFromDlpack(type).status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(DlpackTensor, ViewReadsShapeStridesAndOffset) {
  LegacyExport* exported = MakeLegacy(kFloat32, kCpu);
  DlpackTensor tensor = DlpackTensor::FromLegacy(&exported->managed);
  StatusOr<TensorView> view = tensor.View("actual");
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->dtype, DType::kFloat32);
  EXPECT_EQ(view->memory, MemoryKind::kHost);
  EXPECT_EQ(view->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(view->strides, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(view->data, reinterpret_cast<const std::byte*>(exported->data) + 4);
}

TEST(DlpackTensor, NullStridesMeanCompact) {
  LegacyExport* exported = MakeLegacy(kFloat32, kCpu);
  exported->managed.dl_tensor.strides = nullptr;
  DlpackTensor tensor = DlpackTensor::FromLegacy(&exported->managed);
  StatusOr<TensorView> view = tensor.View("actual");
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(view->strides.empty());
  EXPECT_TRUE(view->IsCompact());
}

TEST(DlpackTensor, DeleterRunsOnceAfterMoves) {
  g_legacy_deletes = 0;
  {
    DlpackTensor first = DlpackTensor::FromLegacy(&MakeLegacy(kFloat32, kCpu)->managed);
    DlpackTensor second = std::move(first);
    DlpackTensor third = DlpackTensor::FromLegacy(&MakeLegacy(kFloat32, kCpu)->managed);
    third = std::move(second);  // the replaced export is released here
    EXPECT_EQ(g_legacy_deletes, 1);
  }
  EXPECT_EQ(g_legacy_deletes, 2);
}

TEST(DlpackTensor, DevicesAreHostOrCuda) {
  struct Case {
    DLDevice device;
    bool ok;
    MemoryKind memory;
  };
  for (Case c : {Case{{kDLCUDA, 3}, true, MemoryKind::kCuda},
                 Case{{kDLCUDAManaged, 0}, true, MemoryKind::kCuda},
                 Case{{kDLCUDAHost, 0}, true, MemoryKind::kHost},
                 Case{{kDLROCM, 0}, false, MemoryKind::kHost}}) {
    DlpackTensor tensor = DlpackTensor::FromLegacy(&MakeLegacy(kFloat32, c.device)->managed);
    StatusOr<TensorView> view = tensor.View("expected");
    ASSERT_EQ(view.ok(), c.ok) << c.device.device_type;
    if (!c.ok) {
      EXPECT_NE(view.status().message().find("expected: tensors on DLPack device type 10"),
                std::string::npos)
          << view.status().message();
      continue;
    }
    EXPECT_EQ(view->memory, c.memory);
    if (c.memory == MemoryKind::kCuda) {
      EXPECT_EQ(view->device_id, c.device.device_id);
    }
  }
}

TEST(DlpackTensor, UnsupportedDtypeNamesTheRole) {
  DlpackTensor tensor =
      DlpackTensor::FromLegacy(&MakeLegacy(DLDataType{kDLComplex, 64, 1}, kCpu)->managed);
  StatusOr<TensorView> view = tensor.View("actual");
  ASSERT_FALSE(view.ok());
  EXPECT_EQ(view.status().message().rfind("actual: unsupported dtype", 0), 0u)
      << view.status().message();
}

TEST(DlpackTensor, VersionedExportOfAnotherMajorVersionIsRefusedAndStillDeleted) {
  g_versioned_deletes = 0;
  static float data[1];
  static int64_t shape[1] = {1};
  auto* managed = new DLManagedTensorVersioned{};
  managed->version = {DLPACK_MAJOR_VERSION + 1, 0};
  managed->dl_tensor = DLTensor{data, kCpu, 1, kFloat32, shape, nullptr, 0};
  managed->deleter = [](DLManagedTensorVersioned* self) {
    ++g_versioned_deletes;
    delete self;
  };
  {
    DlpackTensor tensor = DlpackTensor::FromVersioned(managed);
    EXPECT_EQ(tensor.View("actual").status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(g_versioned_deletes, 1);
}

}  // namespace
}  // namespace kc::native
