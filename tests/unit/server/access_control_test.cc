#include "server/tenancy/access_control.h"

#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "base/sha256.h"

namespace kc::server {
namespace {

class AccessControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = std::filesystem::temp_directory_path() / ("keys-" + std::to_string(::getpid()));
    Write("alice " + Sha256Hex("key-a") + " tenant\nops " + Sha256Hex("key-o") + " operator\n");
    auto control = AccessControl::Load(file_);
    ASSERT_TRUE(control.ok()) << control.status().message();
    control_ = std::move(*control);
  }
  void TearDown() override { std::filesystem::remove(file_); }
  void Write(const std::string& text) { std::ofstream(file_) << text; }

  std::filesystem::path file_;
  std::unique_ptr<AccessControl> control_;
};

TEST_F(AccessControlTest, RolesDecideTheRoutes) {
  EXPECT_EQ(control_->Check(Access::kOpen, "", "1.2.3.4:5").status, 200);
  EXPECT_EQ(control_->Check(Access::kTenant, "Bearer key-a", "1.2.3.4:5").caller->tenant, "alice");
  EXPECT_EQ(control_->Check(Access::kOperator, "Bearer key-a", "1.2.3.4:5").status, 403);
  EXPECT_EQ(control_->Check(Access::kOperator, "Bearer key-o", "1.2.3.4:5").status, 200);
  const AccessDecision none = control_->Check(Access::kTenant, "", "1.2.3.4:5");
  EXPECT_EQ(none.status, 401);
  const AccessDecision wrong = control_->Check(Access::kTenant, "Bearer key-zzz", "1.2.3.4:5");
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(wrong.message.find("key-zzz"), std::string::npos);
}

TEST_F(AccessControlTest, FailedAttemptsAreLimitedPerAddress) {
  for (int i = 0; i < AccessControl::kFailuresPerMinute; ++i)
    EXPECT_EQ(
        control_->Check(Access::kTenant, "Bearer nope", "9.9.9.9:" + std::to_string(i)).status,
        401);
  EXPECT_EQ(control_->Check(Access::kTenant, "Bearer key-a", "9.9.9.9:1").status, 429);
  EXPECT_EQ(control_->Check(Access::kTenant, "Bearer key-a", "8.8.8.8:1").status, 200);
}

TEST_F(AccessControlTest, ReloadRevokesAndABadFileKeepsTheOldKeys) {
  Write("ops " + Sha256Hex("key-o") + " operator\n");
  ASSERT_TRUE(control_->Reload().ok());
  EXPECT_EQ(control_->Check(Access::kTenant, "Bearer key-a", "1.1.1.1:1").status, 401);
  Write("garbage\n");
  EXPECT_FALSE(control_->Reload().ok());
  EXPECT_EQ(control_->Check(Access::kTenant, "Bearer key-o", "1.1.1.1:1").status, 200);
}

TEST(AccessControl, WithoutAFileEverythingIsOpen) {
  AccessControl open;
  EXPECT_EQ(open.Check(Access::kOperator, "", "1.1.1.1:1").status, 200);
}

}  // namespace
}  // namespace kc::server
