// A worker process's settings (worker/process_settings.h) are set once.
#include "worker/process_settings.h"

#include <gtest/gtest.h>

namespace kc::worker {
namespace {

TEST(ProcessSettings, DefaultsHoldUntilSet) {
  ProcessSettings settings;
  EXPECT_FALSE(settings.is_set());
  EXPECT_EQ(settings.get().device, ipc::WorkerDevice::kCpu);
  EXPECT_EQ(settings.get().cpu_execution, ipc::CpuExecution::kHost);
  EXPECT_EQ(settings.get().max_libraries, 256u);
}

TEST(ProcessSettings, TheFirstSetIsKept) {
  ProcessSettings settings;
  ipc::WorkerSettings gpu;
  gpu.device = ipc::WorkerDevice::kGpu;
  gpu.gpu_arch = "sm_90a";
  ASSERT_TRUE(settings.Set(gpu).ok());
  EXPECT_TRUE(settings.is_set());
  EXPECT_EQ(settings.get().device, ipc::WorkerDevice::kGpu);
  EXPECT_EQ(settings.get().gpu_arch, "sm_90a");
}

TEST(ProcessSettings, ASecondSetIsRefusedAndChangesNothing) {
  ProcessSettings settings;
  ipc::WorkerSettings gpu;
  gpu.device = ipc::WorkerDevice::kGpu;
  ASSERT_TRUE(settings.Set(gpu).ok());
  Status again = settings.Set(ipc::WorkerSettings{});  // user code asking for the CPU's timer
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(settings.get().device, ipc::WorkerDevice::kGpu);
}

}  // namespace
}  // namespace kc::worker
