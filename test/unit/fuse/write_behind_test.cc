// WriteBehind as a state machine: writes offered, runs gathered and sent
// through a recording sender, outcomes fed back by hand. No servers.
#include "fuse/write_behind.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

namespace clf::fuse {
namespace {

using Mode = WriteBehind::Mode;

struct Sent {
  Handle ino;
  uint64_t offset;
  std::string data;
};

// A sender that records what it was given; the test answers each by EndWrite.
class Recorder {
 public:
  WriteBehind::Sender sender() {
    return [this](Handle ino, const Layout&, uint64_t offset, std::string data) {
      std::lock_guard<std::mutex> l(mu_);
      sent_.push_back(Sent{ino, offset, std::move(data)});
      cv_.notify_all();
    };
  }
  std::vector<Sent> Take() {
    std::lock_guard<std::mutex> l(mu_);
    return std::exchange(sent_, {});
  }
  // Waits (up to 10 s) until something was sent.
  bool WaitSent() {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(10), [this] { return !sent_.empty(); });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Sent> sent_;
};

WriteBehind::Options Small() {
  WriteBehind::Options o;
  o.max_bytes = 64;
  o.run_bytes = 16;
  o.run_age = std::chrono::hours(1);  // no timer sends unless a test asks for it
  o.runs_per_file = 2;
  return o;
}

Mode Offer(WriteBehind& wb, Handle ino, uint64_t off, std::string data, bool eligible = true) {
  WriteBehind::Sends sends;
  const Mode m = wb.Offer(ino, Layout{}, off, &data, eligible, &sends);
  wb.SendAll(std::move(sends));
  return m;
}

TEST(WriteBehindTest, ContiguousWritesGatherIntoOneRunSentWhenFull) {
  WriteBehind wb(Small(), false);
  Recorder rec;
  wb.SetSender(rec.sender());
  EXPECT_EQ(Offer(wb, 1, 0, "aaaa"), Mode::kBehind);
  EXPECT_EQ(Offer(wb, 1, 4, "bbbb"), Mode::kBehind);
  EXPECT_EQ(Offer(wb, 1, 8, "cccc"), Mode::kBehind);
  EXPECT_TRUE(rec.Take().empty()) << "12 of 16 bytes: still gathering";
  EXPECT_TRUE(wb.Has(1));
  EXPECT_FALSE(wb.InFlight(1));
  EXPECT_EQ(wb.End(1), 12u);
  EXPECT_EQ(Offer(wb, 1, 12, "dddd"), Mode::kBehind);
  std::vector<Sent> s = rec.Take();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].offset, 0u);
  EXPECT_EQ(s[0].data, "aaaabbbbccccdddd");
  EXPECT_TRUE(wb.InFlight(1));
  EXPECT_EQ(wb.bytes(), 16u);
  EXPECT_TRUE(wb.EndWrite(1, 0, 16, Status::Ok())) << "nothing of file 1 in flight after it";
  EXPECT_FALSE(wb.Has(1));
  EXPECT_EQ(wb.bytes(), 0u);
  EXPECT_EQ(wb.End(1), 0u);
}

TEST(WriteBehindTest, AWriteOverlappingOneInFlightWaitsForIt) {
  WriteBehind wb(Small(), false);
  Recorder rec;
  wb.SetSender(rec.sender());
  EXPECT_EQ(Offer(wb, 1, 0, std::string(16, 'a')), Mode::kBehind);  // full: sent at once
  ASSERT_EQ(rec.Take().size(), 1u);
  std::string over = "xx";
  WriteBehind::Sends sends;
  EXPECT_EQ(wb.Offer(1, Layout{}, 10, &over, true, &sends), Mode::kWaitFirst);
  EXPECT_EQ(over, "xx") << "not taken";
  bool resumed = false;
  EXPECT_TRUE(wb.AfterWrites(1, [&] { resumed = true; }));
  EXPECT_FALSE(resumed);
  EXPECT_TRUE(wb.EndWrite(1, 0, 16, Status::Ok()));
  EXPECT_TRUE(resumed);
  EXPECT_FALSE(wb.AfterWrites(1, [] { FAIL() << "nothing to wait for"; }));
  // A write beside it (no overlap) goes behind while the first is in flight.
  EXPECT_EQ(Offer(wb, 1, 0, std::string(16, 'a')), Mode::kBehind);
  EXPECT_EQ(Offer(wb, 1, 16, "b"), Mode::kBehind);
  (void)wb.EndWrite(1, 0, 16, Status::Ok());
}

TEST(WriteBehindTest, AWriteOverlappingAGatheringRunSendsItFirst) {
  WriteBehind wb(Small(), false);
  Recorder rec;
  wb.SetSender(rec.sender());
  EXPECT_EQ(Offer(wb, 1, 0, "aaaa"), Mode::kBehind);
  // Overwrites bytes 2..5: the gathering run goes out, and this write waits for it.
  EXPECT_EQ(Offer(wb, 1, 2, "zzzz"), Mode::kWaitFirst);
  std::vector<Sent> s = rec.Take();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].data, "aaaa");
  EXPECT_TRUE(wb.EndWrite(1, 0, 4, Status::Ok()));
  EXPECT_EQ(Offer(wb, 1, 2, "zzzz"), Mode::kBehind);
}

TEST(WriteBehindTest, IneligibleWritesAreSynchronousAfterWritesInFlight) {
  WriteBehind wb(Small(), false);
  Recorder rec;
  wb.SetSender(rec.sender());
  EXPECT_EQ(Offer(wb, 1, 100, "zz", false), Mode::kSync) << "nothing of the file behind";
  EXPECT_EQ(Offer(wb, 1, 0, "aaaa"), Mode::kBehind);
  // Not eligible (an O_DIRECT write): the gathering run goes out first and
  // the write waits for it, so it cannot overtake it.
  EXPECT_EQ(Offer(wb, 1, 100, "zz", false), Mode::kWaitFirst);
  ASSERT_EQ(rec.Take().size(), 1u);
  (void)wb.EndWrite(1, 0, 4, Status::Ok());
  EXPECT_EQ(Offer(wb, 1, 100, "zz", false), Mode::kSync);
}

TEST(WriteBehindTest, NoSenderOrPastTheBoundMeansSynchronous) {
  WriteBehind wb(Small(), false);
  EXPECT_EQ(Offer(wb, 1, 0, "a"), Mode::kSync) << "no sender set";
  Recorder rec;
  wb.SetSender(rec.sender());
  // 4 files x 16 bytes in flight = the 64-byte bound.
  for (Handle h = 1; h <= 4; ++h) EXPECT_EQ(Offer(wb, h, 0, std::string(16, 'a')), Mode::kBehind);
  EXPECT_EQ(rec.Take().size(), 4u);
  EXPECT_EQ(Offer(wb, 5, 0, "a"), Mode::kSync) << "bound reached";
  (void)wb.EndWrite(1, 0, 16, Status::Ok());
  EXPECT_EQ(Offer(wb, 5, 0, "a"), Mode::kBehind);
}

TEST(WriteBehindTest, RunsPerFileAreBoundedTheOldestGoesOut) {
  WriteBehind wb(Small(), false);
  Recorder rec;
  wb.SetSender(rec.sender());
  EXPECT_EQ(Offer(wb, 1, 0, "a"), Mode::kBehind);
  EXPECT_EQ(Offer(wb, 1, 100, "b"), Mode::kBehind);
  EXPECT_TRUE(rec.Take().empty());
  EXPECT_EQ(Offer(wb, 1, 200, "c"), Mode::kBehind);  // a third run: the oldest is sent
  std::vector<Sent> s = rec.Take();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].offset, 0u);
  EXPECT_EQ(wb.End(1), 201u);
}

TEST(WriteBehindTest, AFailureIsReportedOnceByTakeError) {
  WriteBehind wb(Small(), false);
  Recorder rec;
  wb.SetSender(rec.sender());
  EXPECT_EQ(Offer(wb, 7, 0, std::string(16, 'a')), Mode::kBehind);
  (void)wb.EndWrite(7, 0, 16, Status(Code::kIo, "disk gone"));
  Status s = wb.TakeError(7);
  EXPECT_EQ(s.code(), Code::kIo);
  EXPECT_NE(s.ToString().find("disk gone"), std::string::npos) << s.ToString();
  EXPECT_TRUE(wb.TakeError(7).ok()) << "taken once";
  EXPECT_TRUE(wb.TakeError(8).ok());
}

TEST(WriteBehindTest, FlushAllSendsEveryRunAndWaitsForAllOfThem) {
  WriteBehind wb(Small(), false);
  Recorder rec;
  wb.SetSender(rec.sender());
  bool flushed = false;
  wb.FlushAll([&] { flushed = true; });
  EXPECT_TRUE(flushed) << "nothing behind: at once";
  EXPECT_EQ(Offer(wb, 1, 0, "a"), Mode::kBehind);
  EXPECT_EQ(Offer(wb, 2, 0, "b"), Mode::kBehind);
  flushed = false;
  wb.FlushAll([&] { flushed = true; });
  std::vector<Sent> s = rec.Take();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_FALSE(flushed);
  // A run gathered before the last answer goes out too before the flush ends.
  EXPECT_EQ(Offer(wb, 3, 0, "c"), Mode::kBehind);
  (void)wb.EndWrite(1, 0, 1, Status::Ok());
  EXPECT_FALSE(flushed);
  (void)wb.EndWrite(2, 0, 1, Status::Ok());
  EXPECT_FALSE(flushed) << "file 3's run was still gathering";
  s = rec.Take();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].ino, 3u);
  (void)wb.EndWrite(3, 0, 1, Status::Ok());
  EXPECT_TRUE(flushed);
}

TEST(WriteBehindTest, TheTimerSendsARunOnceItIsOld) {
  WriteBehind::Options o = Small();
  o.run_age = std::chrono::milliseconds(5);
  WriteBehind wb(o, true);
  Recorder rec;
  wb.SetSender(rec.sender());
  EXPECT_EQ(Offer(wb, 1, 0, "a"), Mode::kBehind);
  ASSERT_TRUE(rec.WaitSent()) << "a 1-byte run never sent by the timer";
  std::vector<Sent> s = rec.Take();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].data, "a");
  (void)wb.EndWrite(1, 0, 1, Status::Ok());
  wb.Stop();
}

}  // namespace
}  // namespace clf::fuse
