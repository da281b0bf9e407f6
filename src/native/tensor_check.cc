#include "native/tensor_check.h"

#include <memory>

#include "native/device_element_source.h"
#include "native/tensor_compare.h"

namespace kc::native {
namespace {

StatusOr<std::unique_ptr<ElementSource>> MakeSource(const TensorView& view, const char* role) {
  if (view.memory == MemoryKind::kHost) {
    return std::unique_ptr<ElementSource>(std::make_unique<HostElementSource>(view));
  }
  KC_ASSIGN_OR_RETURN(DeviceElementSource source, DeviceElementSource::Create(view, role));
  return std::unique_ptr<ElementSource>(std::make_unique<DeviceElementSource>(std::move(source)));
}

}  // namespace

StatusOr<CloseResult> CheckTensorsClose(const TensorView& actual, const TensorView& expected,
                                        Tolerance tolerance) {
  KC_RETURN_IF_ERROR(ValidateTolerance(tolerance));
  if (!LayoutMismatch(actual, expected).empty()) {
    // A shape or dtype mismatch is the answer, even for tensors we could not read.
    HostElementSource actual_source(actual), expected_source(expected);  // never read
    return CompareTensors(actual_source, expected_source, tolerance);
  }
  KC_ASSIGN_OR_RETURN(std::unique_ptr<ElementSource> actual_source, MakeSource(actual, "actual"));
  KC_ASSIGN_OR_RETURN(std::unique_ptr<ElementSource> expected_source,
                      MakeSource(expected, "expected"));
  KC_RETURN_IF_ERROR(SynchronizeDevicesOf(actual, expected));
  return CompareTensors(*actual_source, *expected_source, tolerance);
}

}  // namespace kc::native
