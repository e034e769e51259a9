#include "fuse/statfs_cache.h"

#include <gtest/gtest.h>

#include <vector>

namespace clf::fuse {
namespace {

client::StatFs Figure(uint64_t free) {
  client::StatFs f;
  f.bytes_free = free;
  f.servers_up = 1;
  return f;
}

TEST(StatFsCacheTest, AFreshValueIsAnsweredWithoutAFetch) {
  StatFsCache cache(std::chrono::hours(1));
  int fetches = 0;
  auto fetch = [&](StatFsCache::Reply done) {
    ++fetches;
    done(Figure(100 + fetches));
  };
  std::vector<uint64_t> seen;
  for (int i = 0; i < 3; ++i) {
    cache.Get(fetch, [&](Result<client::StatFs> r) { seen.push_back(r->bytes_free); });
  }
  EXPECT_EQ(fetches, 1);
  EXPECT_EQ(seen, (std::vector<uint64_t>{101, 101, 101}));
}

TEST(StatFsCacheTest, AnOldValueIsFetchedAgain) {
  StatFsCache cache(std::chrono::nanoseconds(0));
  int fetches = 0;
  auto fetch = [&](StatFsCache::Reply done) { done(Figure(++fetches)); };
  uint64_t last = 0;
  for (int i = 0; i < 3; ++i) cache.Get(fetch, [&](Result<client::StatFs> r) { last = r->bytes_free; });
  EXPECT_EQ(fetches, 3);
  EXPECT_EQ(last, 3u);
}

TEST(StatFsCacheTest, CallersDuringAFetchShareItAndAFailureIsNotKept) {
  StatFsCache cache(std::chrono::hours(1));
  std::vector<StatFsCache::Reply> started;
  auto fetch = [&](StatFsCache::Reply done) { started.push_back(std::move(done)); };
  int failed = 0, ok = 0;
  auto count = [&](Result<client::StatFs> r) { r.ok() ? ++ok : ++failed; };
  cache.Get(fetch, count);
  cache.Get(fetch, count);
  ASSERT_EQ(started.size(), 1u);
  started[0](Status(Code::kUnavailable, "no server answers"));
  EXPECT_EQ(failed, 2);
  cache.Get(fetch, count);  // nothing cached: a new fetch
  ASSERT_EQ(started.size(), 2u);
  started[1](Figure(7));
  EXPECT_EQ(ok, 1);
  cache.Get(fetch, count);
  EXPECT_EQ(started.size(), 2u);
  EXPECT_EQ(ok, 2);
}

}  // namespace
}  // namespace clf::fuse
