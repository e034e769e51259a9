// The parts of LockOps (server/ops/lock_ops.h) alone: the state file.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <vector>

#include "server/ops/lock_state_file.h"
#include "test/support/test_util.h"

namespace clf::server {
namespace {

using std::chrono::milliseconds;

// ---------------------------------------------------------------- LockStateFile

class LockStateFileTest : public ::testing::Test {
 protected:
  std::string Path() const { return dir_.str() + "/lock_state"; }
  void WriteRaw(const std::string& text) const { std::ofstream(Path()) << text; }
  clf::testing::TempDir dir_;
};

TEST_F(LockStateFileTest, UsedRecordListsTheLiveSessions) {
  LockStateFile file(Path(), 0xabc);
  EXPECT_FALSE(file.marked_used());
  file.WriteUsed([] { return std::vector<uint64_t>{3, 1, 2}; });
  EXPECT_TRUE(file.marked_used());
  PreviousLockState prev = LockStateFile(Path(), 0xdef).Read();
  EXPECT_EQ(prev.epoch, 0xabcu);
  EXPECT_TRUE(prev.used);
  EXPECT_TRUE(prev.sessions_known);
  EXPECT_EQ(prev.sessions, (std::set<uint64_t>{1, 2, 3}));
}

TEST_F(LockStateFileTest, IdleRecordAndEmptyList) {
  LockStateFile file(Path(), 0x1234);
  file.WriteIdle();
  PreviousLockState prev = file.Read();
  EXPECT_EQ(prev.epoch, 0x1234u);
  EXPECT_FALSE(prev.used);
  EXPECT_FALSE(prev.sessions_known);
  file.WriteUsed([] { return std::vector<uint64_t>{}; });
  prev = file.Read();
  EXPECT_TRUE(prev.used);
  EXPECT_TRUE(prev.sessions_known);
  EXPECT_TRUE(prev.sessions.empty());
}

TEST_F(LockStateFileTest, OlderOrTruncatedRecordsDoNotListTheSessions) {
  WriteRaw("00000000000000aa used\n");  // an older clfd: no list
  PreviousLockState prev = LockStateFile(Path(), 1).Read();
  EXPECT_EQ(prev.epoch, 0xaau);
  EXPECT_TRUE(prev.used);
  EXPECT_FALSE(prev.sessions_known);
  WriteRaw("00000000000000aa used\nsessions 3 1 2\n");  // cut short
  prev = LockStateFile(Path(), 1).Read();
  EXPECT_TRUE(prev.used);
  EXPECT_FALSE(prev.sessions_known);
}

TEST_F(LockStateFileTest, NoFileOrNoPathReadsNothing) {
  EXPECT_EQ(LockStateFile(Path(), 1).Read().epoch, 0u);  // not written yet
  LockStateFile none("", 1);
  EXPECT_FALSE(none.enabled());
  none.WriteUsed([] { return std::vector<uint64_t>{1}; });
  none.WriteIdle();
  EXPECT_FALSE(none.marked_used());
  EXPECT_EQ(none.Read().epoch, 0u);
  EXPECT_FALSE(std::filesystem::exists(Path()));
}

}  // namespace
}  // namespace clf::server
