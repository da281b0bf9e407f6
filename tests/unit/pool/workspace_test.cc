#include "pool/workspace.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "../temp_dir.h"

namespace kc::pool {
namespace {

namespace fs = std::filesystem;

class WorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(root_.empty()) << "mkdtemp failed"; }
  kc::testing::TempDir temp_;
  const fs::path& root_ = temp_.path();
};

TEST_F(WorkspaceTest, CreateMakesThePrivateLayout) {
  auto workspace = Workspace::Create(root_ / "w0", static_cast<uid_t>(-1), static_cast<gid_t>(-1));
  ASSERT_TRUE(workspace.ok()) << workspace.status().message();
  for (const char* dir : {".kcoral/home", ".kcoral/tmp", ".kcoral/cache"})
    EXPECT_TRUE(fs::is_directory(root_ / "w0" / dir)) << dir;
}

TEST_F(WorkspaceTest, EmptyRemovesWhatARequestLeftAndRestoresTheLayout) {
  auto workspace = Workspace::Create(root_ / "w0", static_cast<uid_t>(-1), static_cast<gid_t>(-1));
  ASSERT_TRUE(workspace.ok());
  std::ofstream(root_ / "w0" / "result.bin") << "x";
  std::ofstream(root_ / "w0" / ".kcoral" / "home" / "cache-file") << "x";
  fs::create_directories(root_ / "outside");
  std::ofstream(root_ / "outside" / "precious") << "keep";
  fs::create_directory_symlink(root_ / "outside", root_ / "w0" / "escape");
  EXPECT_TRUE(workspace->Empty());
  EXPECT_FALSE(fs::exists(root_ / "w0" / "result.bin"));
  EXPECT_FALSE(fs::exists(root_ / "w0" / ".kcoral" / "home" / "cache-file"));
  EXPECT_FALSE(fs::is_symlink(root_ / "w0" / "escape"));
  EXPECT_TRUE(fs::exists(root_ / "outside" / "precious"));
  EXPECT_TRUE(fs::is_directory(root_ / "w0" / ".kcoral" / "tmp"));
}

TEST_F(WorkspaceTest, AMoveKeepsTheOwner) {
  auto created = Workspace::Create(root_ / "w0", 65534, 65534);
  ASSERT_TRUE(created.ok());
  Workspace moved = std::move(*created);
  EXPECT_EQ(moved.owner(), 65534u);
  EXPECT_EQ(moved.group(), 65534u);
  Workspace assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.owner(), 65534u);
}

TEST_F(WorkspaceTest, DestructorRemovesTheDirectory) {
  {
    auto workspace =
        Workspace::Create(root_ / "w0", static_cast<uid_t>(-1), static_cast<gid_t>(-1));
    ASSERT_TRUE(workspace.ok());
  }
  EXPECT_FALSE(fs::exists(root_ / "w0"));
}

TEST_F(WorkspaceTest, AnExistingPathIsAnErrorAndIsNotRemoved) {
  fs::create_directory(root_ / "taken");
  std::ofstream(root_ / "taken" / "file") << "x";
  {
    auto workspace =
        Workspace::Create(root_ / "taken", static_cast<uid_t>(-1), static_cast<gid_t>(-1));
    EXPECT_FALSE(workspace.ok());
  }
  EXPECT_TRUE(fs::exists(root_ / "taken" / "file"));
}

}  // namespace
}  // namespace kc::pool
