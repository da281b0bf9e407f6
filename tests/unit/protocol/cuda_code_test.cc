#include "protocol/cuda_code.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace kc::protocol {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::vector<std::string> Names(const std::vector<CudaCode>& codes) {
  std::vector<std::string> names;
  for (const CudaCode& code : codes)
    names.push_back(NameOf(code));
  std::sort(names.begin(), names.end());
  return names;
}

#ifdef KC_CUDA_FIXTURES
TEST(CudaCode, ReadsTheArchitecturesNvccBuiltALibraryFor) {
  const std::string hopper_ampere = ReadFile(KC_CUDA_FIXTURES "/hopper_ampere.so");
  ASSERT_GT(hopper_ampere.size(), 1000u);
  EXPECT_EQ(Names(CudaCodeOf(hopper_ampere)),
            (std::vector<std::string>{"compute_80", "sm_80", "sm_90a"}));
  const std::string blackwell = ReadFile(KC_CUDA_FIXTURES "/blackwell.so");
  EXPECT_EQ(Names(CudaCodeOf(blackwell)),
            (std::vector<std::string>{"compute_120", "sm_100f", "sm_120"}));
}

TEST(CudaCode, ATruncatedLibraryYieldsWhatItHoldsAndNeverReadsPastIt) {
  const std::string library = ReadFile(KC_CUDA_FIXTURES "/hopper_ampere.so");
  for (size_t cut = 0; cut < library.size(); cut += 997) {
    for (const CudaCode& code : CudaCodeOf(std::string_view(library).substr(0, cut))) {
      EXPECT_TRUE(code.arch == 80 || code.arch == 90) << cut;
    }
  }
}
#endif

TEST(CudaCode, SomethingElseCarriesNoCode) {
  EXPECT_TRUE(CudaCodeOf("").empty());
  EXPECT_TRUE(CudaCodeOf("def main():\n    return 1\n").empty());
  EXPECT_TRUE(CudaCodeOf(std::string("\x7f"
                                     "ELF",
                                     4))
                  .empty());
}

TEST(CudaCode, RunsOnFollowsCudaCompatibility) {
  const CudaCode sm80{80, 0, false}, sm90a{90, 'a', false}, sm100f{100, 'f', false},
      ptx80{80, 0, true}, ptx90a{90, 'a', true};
  EXPECT_TRUE(RunsOn(sm80, 80));
  EXPECT_TRUE(RunsOn(sm80, 86));   // a later minor of its major
  EXPECT_FALSE(RunsOn(sm80, 90));  // SASS never crosses a major version
  EXPECT_FALSE(RunsOn(sm80, 75));
  EXPECT_TRUE(RunsOn(sm90a, 90));
  EXPECT_FALSE(RunsOn(sm90a, 100));
  EXPECT_TRUE(RunsOn(sm100f, 103));
  EXPECT_FALSE(RunsOn(sm100f, 120));
  EXPECT_TRUE(RunsOn(ptx80, 90));  // the driver compiles PTX for later architectures
  EXPECT_TRUE(RunsOn(ptx80, 120));
  EXPECT_FALSE(RunsOn(ptx80, 75));
  EXPECT_FALSE(RunsOn(ptx90a, 100));
}

TEST(CudaCode, ArchNumbersFromNames) {
  EXPECT_EQ(ArchNumberOf("sm_90a"), 90);
  EXPECT_EQ(ArchNumberOf("sm_90"), 90);
  EXPECT_EQ(ArchNumberOf("compute_80"), 80);
  EXPECT_EQ(ArchNumberOf("sm_100f"), 100);
  EXPECT_EQ(ArchNumberOf("sm_9"), std::nullopt);
  EXPECT_EQ(ArchNumberOf("sm_90b"), std::nullopt);
  EXPECT_EQ(ArchNumberOf("gpu/sm_90a"), std::nullopt);
  EXPECT_EQ(ArchNumberOf("sm_1000"), std::nullopt);
  EXPECT_EQ(ArchNumberOf(""), std::nullopt);
}

}  // namespace
}  // namespace kc::protocol
