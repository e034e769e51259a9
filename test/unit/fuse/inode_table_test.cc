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

// Begins a truncate that must not wait (nothing on its way).
InodeTable::TruncateTicket Begin(InodeTable& t) {
  std::optional<InodeTable::TruncateTicket> k = t.BeginTruncate(kIno, [] { FAIL() << "waited"; });
  EXPECT_TRUE(k.has_value());
  return k.value_or(InodeTable::TruncateTicket{});
}

TEST(InodeTableTest, ATruncateTakesTheUnreportedWriteEnd) {
  InodeTable t;
  t.Ref(File(0));
  t.NoteWriteEnd(kIno, 6000);
  EXPECT_EQ(t.SizeFloor(kIno), 6000u);
  InodeTable::TruncateTicket k = Begin(t);
  ASSERT_TRUE(k.taken.has_value());
  EXPECT_EQ(*k.taken, 6000u);
  t.TruncateDone(kIno, k, 3000);
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
  t.TruncateDone(kIno, Begin(t), std::nullopt);
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
  EXPECT_FALSE(t.BeginTruncate(kIno, [&] { ++ran; }).has_value());
  EXPECT_EQ(ran, 0);
  t.ReportDone(kIno);
  EXPECT_EQ(ran, 1);
  InodeTable::TruncateTicket k = Begin(t);  // none on its way now
  EXPECT_FALSE(k.taken.has_value());
  t.TruncateDone(kIno, k, 100);
  EXPECT_EQ(ran, 1);
}

TEST(InodeTableTest, AFailedReportAlsoReleasesWaiters) {
  InodeTable t;
  t.Ref(File(0));
  t.NoteWriteEnd(kIno, 10);
  std::optional<uint64_t> end = t.TakeUnreported(kIno);
  int ran = 0;
  EXPECT_FALSE(t.BeginTruncate(kIno, [&] { ++ran; }).has_value());
  t.RestoreUnreported(kIno, *end);
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(t.HasUnreported(kIno));
}

// A close's report (another FUSE thread) right after a truncate began: the
// truncate holds the write end, so the report carries none M could raise the
// size back to, and the truncate's answer is not floored by it (the kernel
// takes a truncate's size from the answer).
TEST(InodeTableTest, AReportAfterATruncateBeganCarriesNoOldWriteEnd) {
  InodeTable t;
  t.Ref(File(0));
  t.NoteWriteEnd(kIno, 183827);
  InodeTable::TruncateTicket k = Begin(t);
  EXPECT_FALSE(t.TakeUnreported(kIno).has_value());
  t.TruncateDone(kIno, k, 152147);
  EXPECT_EQ(t.SizeFloor(kIno), 0u);
  EXPECT_EQ(t.GetFile(kIno)->known_size, 152147u);
}

// Two truncates of one file from this mount reach M one after the other.
TEST(InodeTableTest, ASecondTruncateWaitsForTheFirst) {
  InodeTable t;
  t.Ref(File(0));
  InodeTable::TruncateTicket first = Begin(t);
  int ran = 0;
  EXPECT_FALSE(t.BeginTruncate(kIno, [&] { ++ran; }).has_value());
  t.TruncateDone(kIno, first, 10);
  EXPECT_EQ(ran, 1);
}

// A file this mount has no entry for: nothing to order against, nothing counted.
TEST(InodeTableTest, ATruncateOfAnUnknownFileIsNotCounted) {
  InodeTable t;
  std::optional<InodeTable::TruncateTicket> k = t.BeginTruncate(kIno, [] {});
  ASSERT_TRUE(k.has_value());
  EXPECT_FALSE(k->counted);
  t.TruncateDone(kIno, *k, 0);
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
