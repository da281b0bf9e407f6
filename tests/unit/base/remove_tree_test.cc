#include "base/remove_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "../temp_dir.h"
#include "base/unique_fd.h"

namespace kc {
namespace {

namespace fs = std::filesystem;

class RemoveTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(root_.empty()) << "mkdtemp failed";
    fs::create_directories(root_ / "tree" / "a" / "b");
    std::ofstream(root_ / "tree" / "a" / "b" / "file") << "x";
    fs::create_directories(root_ / "outside");
    std::ofstream(root_ / "outside" / "precious") << "keep";
  }
  kc::testing::TempDir temp_;
  const fs::path& root_ = temp_.path();
};

TEST_F(RemoveTreeTest, RemovesANestedTree) {
  EXPECT_TRUE(RemoveTree((root_ / "tree").string()));
  EXPECT_FALSE(fs::exists(root_ / "tree"));
}

TEST_F(RemoveTreeTest, UnlinksALinkToADirectoryWithoutFollowingIt) {
  fs::create_directory_symlink(root_ / "outside", root_ / "tree" / "a" / "link");
  EXPECT_TRUE(RemoveTree((root_ / "tree").string()));
  EXPECT_FALSE(fs::exists(root_ / "tree"));
  EXPECT_TRUE(fs::exists(root_ / "outside" / "precious"));
}

TEST_F(RemoveTreeTest, ALinkAtTheTopIsUnlinkedNotFollowed) {
  fs::create_directory_symlink(root_ / "outside", root_ / "top-link");
  EXPECT_TRUE(RemoveTree((root_ / "top-link").string()));
  EXPECT_FALSE(fs::is_symlink(root_ / "top-link"));
  EXPECT_TRUE(fs::exists(root_ / "outside" / "precious"));
}

TEST_F(RemoveTreeTest, RemoveContentsKeepsTheDirectoryAndTheNamedEntry) {
  std::ofstream(root_ / "tree" / "kept") << "k";
  UniqueFd dir(::open((root_ / "tree").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(dir.valid());
  EXPECT_TRUE(RemoveContents(dir.get(), "kept"));
  EXPECT_TRUE(fs::exists(root_ / "tree" / "kept"));
  EXPECT_FALSE(fs::exists(root_ / "tree" / "a"));
  // A second call on the same descriptor still sees the directory's entries.
  EXPECT_TRUE(RemoveContents(dir.get()));
  EXPECT_TRUE(fs::is_empty(root_ / "tree"));
}

}  // namespace
}  // namespace kc
