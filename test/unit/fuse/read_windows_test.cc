// ReadWindows' read-ahead chunks: what a stream's reads plan, which reads
// the chunks answer (whole, split, spanning two, still in flight), and what
// a drop or a failed fetch leaves.
#include "fuse/read_windows.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace clf::fuse {
namespace {

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kIno = 7;

// The byte at file offset `o` of the test file.
char ByteAt(uint64_t o) { return static_cast<char>('a' + (o * 7 + o / 4096) % 26); }

std::string Bytes(uint64_t off, uint64_t len) {
  std::string s(len, '\0');
  for (uint64_t i = 0; i < len; ++i) s[i] = ByteAt(off + i);
  return s;
}

std::string Join(const ReadWindows::Pieces& pieces) {
  std::string s;
  for (const ReadWindows::Piece& p : pieces) s.append(p.data->data() + p.off, p.len);
  return s;
}

// Lands every plan with the file's bytes.
void LandAll(ReadWindows& w, const std::vector<ReadWindows::AheadPlan>& plans) {
  for (const ReadWindows::AheadPlan& p : plans) w.LandAhead(kIno, p, true, Bytes(p.off, p.length));
}

TEST(ReadWindowsAheadTest, AStreamFromZeroFetchesTheNextChunksAlignedToChunks) {
  ReadWindows w;
  // A 1 MiB read the kernel cut at a page boundary: 1 MiB - 16 bytes, then 16.
  const uint64_t first = kMiB - 16;
  std::vector<ReadWindows::AheadPlan> plans = w.PlanAhead(kIno, 0, first, 64 * kMiB);
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[0].off, first);  // the rest of chunk 0
  EXPECT_EQ(plans[0].length, 16u);
  EXPECT_EQ(plans[1].off, kMiB);
  EXPECT_EQ(plans[1].length, kMiB);
  EXPECT_EQ(plans[2].off, 2 * kMiB);
  EXPECT_EQ(plans[2].length, kMiB);
  LandAll(w, plans);

  ReadWindows::Pieces got;
  EXPECT_EQ(w.TakeAhead(kIno, first, 16, &got, nullptr), ReadWindows::Ahead::kReady);
  EXPECT_EQ(Join(got), Bytes(first, 16));
  // The next split read: 1 MiB - 16 from chunk 1, then 16 from its end.
  got.clear();
  EXPECT_EQ(w.TakeAhead(kIno, kMiB, first, &got, nullptr), ReadWindows::Ahead::kReady);
  EXPECT_EQ(Join(got), Bytes(kMiB, first));
  // It continues the stream: the chunk after those fetched is planned.
  plans = w.PlanAhead(kIno, kMiB, first, 64 * kMiB);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].off, 3 * kMiB);
  got.clear();
  EXPECT_EQ(w.TakeAhead(kIno, kMiB + first, 16, &got, nullptr), ReadWindows::Ahead::kReady);
  EXPECT_EQ(Join(got), Bytes(kMiB + first, 16));
  EXPECT_EQ(w.ahead_served(), 3u);
}

TEST(ReadWindowsAheadTest, ASplitStreamAwayFromZeroReachesTheReadAheadOnItsSecondRead) {
  ReadWindows w;
  const uint64_t start = 64 * kMiB;
  const uint64_t first = kMiB - 16;
  ReadWindows::Pieces got;
  // A stream's first read away from offset 0 plans nothing and finds nothing
  // (the caller fetches it), and so does the 16-byte rest of its split read.
  EXPECT_EQ(w.TakeAhead(kIno, start, first, &got, nullptr), ReadWindows::Ahead::kMiss);
  EXPECT_TRUE(w.PlanAhead(kIno, start, first, 256 * kMiB).empty());
  EXPECT_EQ(w.TakeAhead(kIno, start + first, 16, &got, nullptr), ReadWindows::Ahead::kMiss);
  // The next large read starts where those 16 bytes ended: it continues the
  // stream, so the chunks after it are fetched.
  EXPECT_EQ(w.TakeAhead(kIno, start + kMiB, first, &got, nullptr), ReadWindows::Ahead::kMiss);
  std::vector<ReadWindows::AheadPlan> plans = w.PlanAhead(kIno, start + kMiB, first, 256 * kMiB);
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[0].off, start + kMiB + first);
  EXPECT_EQ(plans[1].off, start + 2 * kMiB);
  LandAll(w, plans);
  EXPECT_EQ(w.TakeAhead(kIno, start + kMiB + first, 16, &got, nullptr), ReadWindows::Ahead::kReady);
  got.clear();
  EXPECT_EQ(w.TakeAhead(kIno, start + 2 * kMiB, first, &got, nullptr), ReadWindows::Ahead::kReady);
  EXPECT_EQ(Join(got), Bytes(start + 2 * kMiB, first));
}

TEST(ReadWindowsAheadTest, AReadAcrossTwoChunksIsAnsweredFromBoth) {
  ReadWindows w;
  std::vector<ReadWindows::AheadPlan> plans = w.PlanAhead(kIno, 0, kMiB, 64 * kMiB);
  ASSERT_EQ(plans.size(), 2u);  // chunks 1 and 2
  LandAll(w, plans);
  ReadWindows::Pieces got;
  const uint64_t at = kMiB + kMiB / 2;
  ASSERT_EQ(w.TakeAhead(kIno, at, kMiB, &got, nullptr), ReadWindows::Ahead::kReady);
  EXPECT_EQ(got.size(), 2u);
  EXPECT_EQ(Join(got), Bytes(at, kMiB));
}

TEST(ReadWindowsAheadTest, AReadOfAChunkInFlightGetsItsBytesWhenItLands) {
  ReadWindows w;
  std::vector<ReadWindows::AheadPlan> plans = w.PlanAhead(kIno, 0, kMiB, 64 * kMiB);
  ASSERT_EQ(plans.size(), 2u);
  w.LandAhead(kIno, plans[0], true, Bytes(plans[0].off, plans[0].length));
  // Spans the landed chunk 1 and chunk 2, still in flight.
  std::optional<std::string> answer;
  ReadWindows::Pieces got;
  const uint64_t at = 2 * kMiB - 4096;
  ASSERT_EQ(w.TakeAhead(kIno, at, 8192, &got,
                        [&](bool ok, ReadWindows::Pieces p) {
                          ASSERT_TRUE(ok);
                          answer = Join(p);
                        }),
            ReadWindows::Ahead::kWaiting);
  EXPECT_FALSE(answer.has_value());
  // A drop of the file (an open, a write) does not strand the waiting read.
  w.Drop(kIno);
  w.LandAhead(kIno, plans[1], true, Bytes(plans[1].off, plans[1].length));
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(*answer, Bytes(at, 8192));
  // Nothing of the dropped file answers later reads.
  got.clear();
  EXPECT_EQ(w.TakeAhead(kIno, 2 * kMiB, 4096, &got, nullptr), ReadWindows::Ahead::kMiss);
}

TEST(ReadWindowsAheadTest, AFailedFetchFailsItsWaitersAndLeavesNoChunk) {
  ReadWindows w;
  std::vector<ReadWindows::AheadPlan> plans = w.PlanAhead(kIno, 0, kMiB, 64 * kMiB);
  ASSERT_EQ(plans.size(), 2u);
  std::optional<bool> result;
  ReadWindows::Pieces got;
  ASSERT_EQ(w.TakeAhead(kIno, kMiB, 4096, &got, [&](bool ok, ReadWindows::Pieces) { result = ok; }),
            ReadWindows::Ahead::kWaiting);
  w.LandAhead(kIno, plans[0], false, {});
  ASSERT_TRUE(result.has_value());
  EXPECT_FALSE(*result);
  EXPECT_EQ(w.TakeAhead(kIno, kMiB + 4096, 4096, &got, nullptr), ReadWindows::Ahead::kMiss);
}

TEST(ReadWindowsAheadTest, ARandomReadPlansNothingAndChunksStopAtEof) {
  ReadWindows w;
  EXPECT_TRUE(w.PlanAhead(kIno, 5 * kMiB, kMiB, 64 * kMiB).empty());  // continues no stream
  // Its end is a stream now: the next read there plans, clipped at eof.
  const uint64_t eof = 7 * kMiB + 100;
  std::vector<ReadWindows::AheadPlan> plans = w.PlanAhead(kIno, 6 * kMiB, kMiB, eof);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].off, 7 * kMiB);
  EXPECT_EQ(plans[0].length, 100u);
}

TEST(ReadWindowsAheadTest, ChunksReadsTookWholeLeaveAndTheTableStaysBounded) {
  ReadWindows w;
  // Many streams' chunks, never read: the table keeps at most kAheadChunks.
  size_t planned = 0;
  for (uint64_t s = 0; s < 12; ++s) {
    const uint64_t at = s * 16 * kMiB;
    w.PlanAhead(kIno, at, kMiB, 1024 * kMiB);  // a new stream (nothing planned unless at 0)
    std::vector<ReadWindows::AheadPlan> plans = w.PlanAhead(kIno, at + kMiB, kMiB, 1024 * kMiB);
    planned += plans.size();
    LandAll(w, plans);
  }
  EXPECT_GT(planned, ReadWindows::kAheadChunks);
  size_t held = 0;
  for (uint64_t off = 0; off < 1024 * kMiB; off += kMiB) {
    ReadWindows::Pieces got;
    if (w.TakeAhead(kIno, off, kMiB, &got, nullptr) == ReadWindows::Ahead::kReady) {
      ++held;
      EXPECT_EQ(Join(got), Bytes(off, kMiB));
      // Taken whole: gone.
      EXPECT_EQ(w.TakeAhead(kIno, off, 4096, &got, nullptr), ReadWindows::Ahead::kMiss);
    }
  }
  EXPECT_GT(held, 0u);
  EXPECT_LE(held, ReadWindows::kAheadChunks);
}

TEST(ReadWindowsSizesTest, AFileReadMostlyInSmallRequestsReadsSmall) {
  ReadWindows w;
  EXPECT_FALSE(w.ReadsSmall(kIno));  // never read
  // 1 MiB reads the kernel cut in two: one large and one small each.
  for (int i = 0; i < 10; ++i) {
    w.NoteRead(kIno, kMiB - 16);
    w.NoteRead(kIno, 16);
  }
  EXPECT_FALSE(w.ReadsSmall(kIno));
  for (int i = 0; i < 11; ++i) w.NoteRead(kIno, 4096);
  EXPECT_TRUE(w.ReadsSmall(kIno));  // 21 small, 10 large
  EXPECT_FALSE(w.ReadsSmall(kIno + 1));
  // Recent large reads win it back: the counts halve as they grow.
  for (int i = 0; i < 3000; ++i) w.NoteRead(kIno, kMiB);
  EXPECT_FALSE(w.ReadsSmall(kIno));
  // A drop (an open) keeps what was seen.
  for (int i = 0; i < 5000; ++i) w.NoteRead(kIno, 4096);
  w.Drop(kIno);
  EXPECT_TRUE(w.ReadsSmall(kIno));
}

TEST(ReadWindowsSizesTest, RemembersABoundedNumberOfFiles) {
  ReadWindows w;
  for (uint64_t f = 0; f < ReadWindows::kSizeFiles + 10; ++f) {
    for (int i = 0; i < 3; ++i) w.NoteRead(f, 4096);
  }
  EXPECT_FALSE(w.ReadsSmall(0));  // the least recently read went first
  EXPECT_TRUE(w.ReadsSmall(ReadWindows::kSizeFiles + 9));
}

TEST(ReadWindowsAheadTest, AChunkReadersAreDoneWithGivesItsBufferToTheNextFetch) {
  ReadWindows w;
  EXPECT_TRUE(w.TakeBuffer().empty());  // nothing landed yet
  std::vector<ReadWindows::AheadPlan> plans = w.PlanAhead(kIno, 0, kMiB, 64 * kMiB);
  ASSERT_EQ(plans.size(), 2u);
  std::string first = Bytes(plans[0].off, plans[0].length);
  const char* memory = first.data();
  w.LandAhead(kIno, plans[0], true, std::move(first));
  ReadWindows::Pieces got;
  ASSERT_EQ(w.TakeAhead(kIno, kMiB, kMiB, &got, nullptr), ReadWindows::Ahead::kReady);
  // Taken whole, so out of the table, but the reply still holds the bytes.
  EXPECT_TRUE(w.TakeBuffer().empty());
  EXPECT_EQ(Join(got), Bytes(kMiB, kMiB));
  got.clear();  // the reply is done
  std::string reused = w.TakeBuffer();
  EXPECT_EQ(reused.size(), ReadWindows::kChunk);
  EXPECT_EQ(reused.data(), memory) << "a new buffer, not the chunk's";
  EXPECT_TRUE(w.TakeBuffer().empty());
  // A dropped file's chunks give their buffers back too.
  w.LandAhead(kIno, plans[1], true, Bytes(plans[1].off, plans[1].length));
  w.Drop(kIno);
  EXPECT_EQ(w.TakeBuffer().size(), ReadWindows::kChunk);
}

}  // namespace
}  // namespace clf::fuse
