// WalkCache: names answered for the entry timeout, forgotten on demand,
// bounded.
#include "fuse/walk_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "test/support/test_util.h"

namespace clf::fuse {
namespace {

using namespace std::chrono_literals;

TEST(WalkCacheTest, AnswersANoteUntilTheTimeout) {
  constexpr auto kTimeout = 200ms;
  WalkCache c(kTimeout);
  c.Note(1, "a", 10);
  ASSERT_TRUE(c.Find(1, "a").has_value());
  EXPECT_EQ(*c.Find(1, "a"), 10u);
  EXPECT_FALSE(c.Find(1, "b").has_value());
  EXPECT_FALSE(c.Find(2, "a").has_value());  // another directory
  clf::testing::WaitPast(kTimeout + 50ms);  // the note's entry timeout runs out
  EXPECT_FALSE(c.Find(1, "a").has_value());
}

TEST(WalkCacheTest, ForgetAndRenote) {
  WalkCache c(10s);
  c.Note(1, "a", 10);
  c.Forget(1, "a");
  EXPECT_FALSE(c.Find(1, "a").has_value());
  c.Note(1, "a", 11);
  c.Note(1, "a", 12);  // the latest wins
  EXPECT_EQ(*c.Find(1, "a"), 12u);
}

TEST(WalkCacheTest, KeysDoNotCollide) {
  // The key is the parent's 8 bytes then the name: names with the bytes of
  // another parent must not match.
  WalkCache c(10s);
  c.Note(0x6161616161616161ull, "", 1);
  c.Note(0x61, std::string("\0\0\0\0\0\0\0", 7) + "aaaaaaaa", 2);
  EXPECT_EQ(*c.Find(0x6161616161616161ull, ""), 1u);
  EXPECT_FALSE(c.Find(0x6161616161616161ull, "a").has_value());
}

TEST(WalkCacheTest, StaysWithinItsBound) {
  WalkCache c(10s, 100);
  for (uint64_t i = 0; i < 1000; ++i) c.Note(i, "d", i + 1);
  EXPECT_LE(c.size(), 100u);
  EXPECT_EQ(*c.Find(999, "d"), 1000u);  // the newest is kept
}

TEST(WalkCacheTest, ZeroTimeoutKeepsNothing) {
  WalkCache c(0s);
  c.Note(1, "a", 10);
  EXPECT_FALSE(c.Find(1, "a").has_value());
  EXPECT_EQ(c.size(), 0u);
}

}  // namespace
}  // namespace clf::fuse
