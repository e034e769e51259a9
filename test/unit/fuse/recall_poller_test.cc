// RecallPoller with a fake long poll the test answers: recalls delivered,
// polls made again, a failed poll reported and polled again on a tick.
#include "fuse/recall_poller.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>

namespace clf::fuse {
namespace {

class Harness {
 public:
  explicit Harness(std::chrono::milliseconds tick = std::chrono::milliseconds(5)) {
    RecallPoller::Hooks h;
    h.poll = [this](ServerId s, uint32_t, std::function<void(Result<std::vector<Handle>>)> done) {
      std::lock_guard<std::mutex> l(mu_);
      polls_.push_back({s, std::move(done)});
      ++polls_made_[s];
      cv_.notify_all();
    };
    h.recalled = [this](ServerId s, std::vector<Handle> dirs) {
      std::lock_guard<std::mutex> l(mu_);
      for (Handle d : dirs) recalled_.push_back({s, d});
    };
    h.lost = [this](ServerId s) {
      std::lock_guard<std::mutex> l(mu_);
      lost_.push_back(s);
    };
    h.tick = [this](RecallPoller::Clock::time_point, const std::set<ServerId>& lost) {
      std::lock_guard<std::mutex> l(mu_);
      ++ticks_;
      for (ServerId s : lost) tick_lost_.push_back(s);
      cv_.notify_all();
    };
    h.call_begin = [this] { ++calls_; };
    h.call_end = [this] { --calls_; };
    p = std::make_unique<RecallPoller>(std::move(h), 1000, tick);
  }
  ~Harness() {
    p->Stop();
    // Polls still open end with an answer (as EndLeaseSession makes them).
    for (auto& [s, done] : TakePolls()) done(std::vector<Handle>{});
  }
  using Open = std::pair<ServerId, std::function<void(Result<std::vector<Handle>>)>>;
  // Waits (up to 10 s) for `n` polls open, and takes them.
  std::vector<Open> WaitPolls(size_t n) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::seconds(10), [&] { return polls_.size() >= n; });
    return std::exchange(polls_, {});
  }
  std::vector<Open> TakePolls() {
    std::lock_guard<std::mutex> l(mu_);
    return std::exchange(polls_, {});
  }
  bool WaitTickWithLost(ServerId s) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(10), [&] {
      return std::find(tick_lost_.begin(), tick_lost_.end(), s) != tick_lost_.end();
    });
  }
  int polls_made(ServerId s) {
    std::lock_guard<std::mutex> l(mu_);
    return polls_made_[s];
  }
  std::vector<std::pair<ServerId, Handle>> recalled() {
    std::lock_guard<std::mutex> l(mu_);
    return recalled_;
  }
  std::vector<ServerId> lost() {
    std::lock_guard<std::mutex> l(mu_);
    return lost_;
  }
  int calls() const { return calls_; }

  std::unique_ptr<RecallPoller> p;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Open> polls_;
  std::map<ServerId, int> polls_made_;
  std::vector<std::pair<ServerId, Handle>> recalled_;
  std::vector<ServerId> lost_, tick_lost_;
  int ticks_ = 0;
  std::atomic<int> calls_{0};
};

TEST(RecallPollerTest, OnePollPerServerRecallsDeliveredAndPolledAgain) {
  Harness h(std::chrono::milliseconds(1000));
  h.p->Watch(1);
  h.p->Watch(1);  // already polled
  h.p->Watch(2);
  std::vector<Harness::Open> open = h.WaitPolls(2);
  ASSERT_EQ(open.size(), 2u);
  EXPECT_EQ(h.polls_made(1), 1);
  EXPECT_EQ(h.calls(), 2);
  EXPECT_EQ(h.p->watched(), (std::set<ServerId>{1, 2}));
  for (auto& [s, done] : open) {
    if (s == 1) done(std::vector<Handle>{100, 101});
  }
  EXPECT_EQ(h.recalled(), (std::vector<std::pair<ServerId, Handle>>{{1, 100}, {1, 101}}));
  std::vector<Harness::Open> again = h.WaitPolls(1);
  ASSERT_EQ(again.size(), 1u) << "server 1 polled again after its answer";
  EXPECT_EQ(again[0].first, 1u);
  EXPECT_EQ(h.polls_made(1), 2);
  for (auto& [s, done] : again) done(std::vector<Handle>{});
  for (auto& [s, done] : open) {
    if (s == 2) done(std::vector<Handle>{});
  }
  (void)h.WaitPolls(2);  // both polled again, answered by the harness's end
  EXPECT_TRUE(h.lost().empty());
}

TEST(RecallPollerTest, AFailedPollReportsTheServerLostAndPollsItAgainOnATick) {
  Harness h;
  h.p->Watch(3);
  std::vector<Harness::Open> open = h.WaitPolls(1);
  ASSERT_EQ(open.size(), 1u);
  open[0].second(Status(Code::kUnavailable, "server restarted"));
  EXPECT_EQ(h.lost(), std::vector<ServerId>{3});
  EXPECT_TRUE(h.recalled().empty());
  ASSERT_TRUE(h.WaitTickWithLost(3)) << "the tick never named the lost server";
  std::vector<Harness::Open> again = h.WaitPolls(1);
  ASSERT_EQ(again.size(), 1u) << "polled again after the tick";
  EXPECT_EQ(again[0].first, 3u);
  again[0].second(std::vector<Handle>{});
}

TEST(RecallPollerTest, AfterStopAnAnswerStartsNoNewPoll) {
  Harness h;
  h.p->Watch(1);
  std::vector<Harness::Open> open = h.WaitPolls(1);
  ASSERT_EQ(open.size(), 1u);
  h.p->Stop();
  open[0].second(std::vector<Handle>{});
  EXPECT_EQ(h.polls_made(1), 1);
  EXPECT_TRUE(h.p->watched().empty());
  EXPECT_EQ(h.calls(), 0);
  h.p->Watch(2);
  EXPECT_EQ(h.polls_made(2), 0) << "no poll once stopped";
}

}  // namespace
}  // namespace clf::fuse
