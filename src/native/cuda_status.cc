#include "native/cuda_status.h"

#include <string>

namespace kc::native {
namespace {

// Errors that mean "this process cannot use a GPU at all", not "the call failed".
bool IsNoDeviceError(cudaError_t error) {
  switch (error) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorDevicesUnavailable:
      return true;
    default:
      return false;
  }
}

// "cudaDeviceSynchronize() at cupti_timer.cc:42"
std::string Where(const char* expression, const char* file, int line) {
  std::string base(file);
  if (size_t slash = base.rfind('/'); slash != std::string::npos) base.erase(0, slash + 1);
  return std::string(expression) + " at " + base + ":" + std::to_string(line);
}

}  // namespace

const char* CudaErrorName(cudaError_t error) {
  const char* name = cudaGetErrorName(error);
  return name != nullptr ? name : "cudaErrorUnknown";
}

Status CudaStatus(cudaError_t error, const char* expression, const char* file, int line) {
  const char* text = cudaGetErrorString(error);
  std::string message = std::string(CudaErrorName(error)) + ": " +
                        (text != nullptr ? text : "unknown CUDA error") + " (" +
                        Where(expression, file, line) + ")";
  StatusCode code =
      IsNoDeviceError(error) ? StatusCode::kUnavailable : StatusCode::kFailedPrecondition;
  return Status(code, std::move(message));
}

Status CuptiStatus(CUptiResult result, const char* expression, const char* file, int line) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) {
    text = "unknown CUPTI error";
  }
  std::string message = "CUPTI error " + std::to_string(static_cast<int>(result)) + " " + text +
                        " (" + Where(expression, file, line) + ")";
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    message += "; another CUPTI client (a profiler such as ncu or nsys?) holds the subscription";
  }
  return UnavailableError(std::move(message));
}

}  // namespace kc::native
