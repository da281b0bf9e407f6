#include "store/build_cache.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "../temp_dir.h"

namespace kc::store {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

class BuildCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(root_.empty()) << "mkdtemp failed";
    fs::create_directories(root_ / "run1" / "tvm-ffi" / "lib_abc");
    std::ofstream(root_ / "run1" / "tvm-ffi" / "lib_abc" / "lib.so") << "built";
    fs::create_directories(root_ / "run2");
  }
  kc::testing::TempDir temp_;
  const fs::path& root_ = temp_.path();
};

TEST_F(BuildCacheTest, TheSameProgramGetsItsEntryBack) {
  BuildCache cache(root_ / "cache", 1 << 20);
  const std::string key = BuildCache::KeyOf(R"({"instructions":[]})");
  cache.Save(key, root_ / "run1");
  EXPECT_GT(cache.Restore(key, root_ / "run2", static_cast<uid_t>(-1), static_cast<gid_t>(-1)), 0u);
  EXPECT_EQ(Read(root_ / "run2" / "tvm-ffi" / "lib_abc" / "lib.so"), "built");
  // Build tools compare modification times: they survive the copies.
  EXPECT_EQ(fs::last_write_time(root_ / "run2" / "tvm-ffi" / "lib_abc" / "lib.so"),
            fs::last_write_time(root_ / "run1" / "tvm-ffi" / "lib_abc" / "lib.so"));
}

TEST_F(BuildCacheTest, AnotherProgramGetsNothing) {
  BuildCache cache(root_ / "cache", 1 << 20);
  cache.Save(BuildCache::KeyOf("program A"), root_ / "run1");
  EXPECT_EQ(cache.Restore(BuildCache::KeyOf("program B"), root_ / "run2", static_cast<uid_t>(-1),
                          static_cast<gid_t>(-1)),
            0u);
  EXPECT_TRUE(fs::is_empty(root_ / "run2"));
}

TEST_F(BuildCacheTest, LinksAreNotFollowedWhenSaving) {
  fs::create_directories(root_ / "secret");
  std::ofstream(root_ / "secret" / "key") << "secret";
  fs::create_directory_symlink(root_ / "secret", root_ / "run1" / "tvm-ffi" / "link");
  fs::create_symlink(root_ / "secret" / "key", root_ / "run1" / "tvm-ffi" / "file-link");
  BuildCache cache(root_ / "cache", 1 << 20);
  const std::string key = BuildCache::KeyOf("program");
  cache.Save(key, root_ / "run1");
  cache.Restore(key, root_ / "run2", static_cast<uid_t>(-1), static_cast<gid_t>(-1));
  EXPECT_TRUE(fs::exists(root_ / "run2" / "tvm-ffi" / "lib_abc" / "lib.so"));
  EXPECT_FALSE(fs::exists(root_ / "run2" / "tvm-ffi" / "link"));
  EXPECT_FALSE(fs::exists(root_ / "run2" / "tvm-ffi" / "file-link"));
}

TEST_F(BuildCacheTest, TheFirstSaveWinsAndAnEntryOverCapacityIsNotSaved) {
  BuildCache cache(root_ / "cache", 8);  // smaller than lib.so's 5 bytes plus anything
  std::ofstream(root_ / "run1" / "big") << "0123456789";
  const std::string key = BuildCache::KeyOf("program");
  cache.Save(key, root_ / "run1");
  EXPECT_EQ(cache.Restore(key, root_ / "run2", static_cast<uid_t>(-1), static_cast<gid_t>(-1)), 0u);
  EXPECT_FALSE(fs::exists(root_ / "cache" / key));
}

TEST_F(BuildCacheTest, AnEmptyDirectoryDisablesTheCache) {
  BuildCache cache("", 1 << 20);
  EXPECT_FALSE(cache.enabled());
  cache.Save(BuildCache::KeyOf("p"), root_ / "run1");
  EXPECT_EQ(cache.Restore(BuildCache::KeyOf("p"), root_ / "run2", static_cast<uid_t>(-1),
                          static_cast<gid_t>(-1)),
            0u);
}

}  // namespace
}  // namespace kc::store
