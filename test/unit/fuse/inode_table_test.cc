// The inode table's size bookkeeping as a state machine (no FUSE, no RPC):
// write ends, size reports and truncates.
#include "fuse/inode_table.h"

#include <gtest/gtest.h>

namespace clf::fuse {
namespace {

constexpr uint64_t kIno = 0x1234;

client::Attr File(uint64_t size) {
  client::Attr a;
  a.handle = kIno;
  a.type = client::FileType::kRegular;
  a.size = size;
  return a;
}

TEST(InodeTableTest, ATruncateTakesTheUnreportedWriteEnd) {
  InodeTable t;
  t.Ref(File(0));
  t.NoteWriteEnd(kIno, 6000);
  EXPECT_EQ(t.SizeFloor(kIno), 6000u);
  std::optional<uint64_t> taken = t.TakeForTruncate(kIno);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(*taken, 6000u);
  t.TruncateDone(kIno, taken, 3000);
  // Nothing left to report: a flush after the truncate must not raise the size.
  EXPECT_FALSE(t.HasUnreported(kIno));
  EXPECT_FALSE(t.TakeUnreported(kIno).has_value());
  EXPECT_EQ(t.SizeFloor(kIno), 0u);
  EXPECT_EQ(t.GetFile(kIno)->known_size, 3000u);
}

TEST(InodeTableTest, AFailedTruncateLeavesTheWriteEndToReport) {
  InodeTable t;
  t.Ref(File(0));
  t.NoteWriteEnd(kIno, 6000);
  std::optional<uint64_t> taken = t.TakeForTruncate(kIno);
  t.TruncateDone(kIno, taken, std::nullopt);
  std::optional<uint64_t> end = t.TakeUnreported(kIno);
  ASSERT_TRUE(end.has_value());
  EXPECT_EQ(*end, 6000u);
}

TEST(InodeTableTest, ATruncateWaitsForReportsOnTheirWay) {
  InodeTable t;
  t.Ref(File(0));
  t.NoteWriteEnd(kIno, 6000);
  ASSERT_TRUE(t.TakeUnreported(kIno).has_value());  // a flush's report is sent
  int ran = 0;
  EXPECT_TRUE(t.AfterReports(kIno, [&] { ++ran; }));
  EXPECT_EQ(ran, 0);
  t.ReportDone(kIno);
  EXPECT_EQ(ran, 1);
  EXPECT_FALSE(t.AfterReports(kIno, [&] { ++ran; }));  // none on its way now
  EXPECT_EQ(ran, 1);
}

TEST(InodeTableTest, AFailedReportAlsoReleasesWaiters) {
  InodeTable t;
  t.Ref(File(0));
  t.NoteWriteEnd(kIno, 10);
  std::optional<uint64_t> end = t.TakeUnreported(kIno);
  int ran = 0;
  EXPECT_TRUE(t.AfterReports(kIno, [&] { ++ran; }));
  t.RestoreUnreported(kIno, *end);
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(t.HasUnreported(kIno));
}

TEST(InodeTableTest, SizeKnownFollowsWritesAndServerAttrs) {
  InodeTable t;
  t.Ref(File(100));
  EXPECT_EQ(t.GetFile(kIno)->known_size, 100u);
  t.NoteWriteEnd(kIno, 50);
  EXPECT_EQ(t.GetFile(kIno)->known_size, 100u);
  t.NoteWriteEnd(kIno, 500);
  EXPECT_EQ(t.GetFile(kIno)->known_size, 500u);
}

}  // namespace
}  // namespace clf::fuse
