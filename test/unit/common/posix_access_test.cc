// The POSIX permission rules the servers and the mount share
// (common/posix_access.h), against what Linux does for a caller without
// CAP_FSETID (write, truncate and chown clear the privilege bits).
#include "common/posix_access.h"

#include <gtest/gtest.h>

#include <vector>

namespace clf {
namespace {

TEST(PosixAccessTest, KillPrivAlwaysClearsSetuid) {
  EXPECT_EQ(ModeAfterKillPriv(04755, false, true), 0755u);
  EXPECT_EQ(ModeAfterKillPriv(04755, true, true), 0755u) << "root without CAP_FSETID too";
  EXPECT_EQ(ModeAfterKillPriv(0644, false, false), 0644u) << "nothing to clear";
}

TEST(PosixAccessTest, KillPrivClearsSetgidWhenGroupExecutable) {
  EXPECT_EQ(ModeAfterKillPriv(02755, true, true), 0755u);
  EXPECT_EQ(ModeAfterKillPriv(06775, false, true), 0775u);
}

TEST(PosixAccessTest, KillPrivKeepsMandatoryLockingSetgidForGroupMembers) {
  // setgid without group execute (the old mandatory-locking mark) stays
  // for root and for members of the file's group, goes for anyone else.
  EXPECT_EQ(ModeAfterKillPriv(02644, true, false), 02644u);
  EXPECT_EQ(ModeAfterKillPriv(02644, false, true), 02644u);
  EXPECT_EQ(ModeAfterKillPriv(02644, false, false), 0644u);
}

TEST(PosixAccessTest, OwnerThenGroupThenOthers) {
  const std::vector<uint32_t> none;
  const std::vector<uint32_t> in7{7};
  // The owner's bits decide for the owner even when the group's would allow.
  EXPECT_FALSE(MayAccess(0070, 10, 7, false, 10, 7, in7, kMayRead));
  EXPECT_TRUE(MayAccess(0070, 10, 7, false, 11, 1, in7, kMayRead));  // a supplementary group
  EXPECT_FALSE(MayAccess(0704, 10, 7, false, 11, 7, none, kMayRead)) << "group bits, not others'";
  EXPECT_TRUE(MayAccess(0004, 10, 7, false, 11, 8, none, kMayRead));
  EXPECT_FALSE(MayAccess(0006, 10, 7, false, 11, 8, none, kMayRead | kMayExec));
}

TEST(PosixAccessTest, RootMayDoAnythingButExecuteWhatNobodyMay) {
  const std::vector<uint32_t> none;
  EXPECT_TRUE(MayAccess(0000, 10, 7, false, 0, 0, none, kMayRead | kMayWrite));
  EXPECT_FALSE(MayAccess(0666, 10, 7, false, 0, 0, none, kMayExec));
  EXPECT_TRUE(MayAccess(0001, 10, 7, false, 0, 0, none, kMayExec));
  EXPECT_TRUE(MayAccess(0000, 10, 7, true, 0, 0, none, kMayExec)) << "search of a directory";
}

}  // namespace
}  // namespace clf
