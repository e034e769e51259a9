// Test helpers shared by every suite: status assertions and temporary directories.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include "common/status.h"

#define ASSERT_OK(expr)                                           \
  do {                                                            \
    const ::clf::Status clf_s_ = ::clf::testing::ToStatus(expr);  \
    ASSERT_TRUE(clf_s_.ok()) << #expr << ": " << clf_s_.ToString(); \
  } while (0)
#define EXPECT_OK(expr)                                           \
  do {                                                            \
    const ::clf::Status clf_s_ = ::clf::testing::ToStatus(expr);  \
    EXPECT_TRUE(clf_s_.ok()) << #expr << ": " << clf_s_.ToString(); \
  } while (0)
#define ASSERT_STATUS(code_, expr)                                          \
  do {                                                                      \
    const ::clf::Status clf_s_ = ::clf::testing::ToStatus(expr);            \
    ASSERT_EQ(clf_s_.code(), code_) << #expr << ": " << clf_s_.ToString();  \
  } while (0)
#define EXPECT_STATUS(code_, expr)                                          \
  do {                                                                      \
    const ::clf::Status clf_s_ = ::clf::testing::ToStatus(expr);            \
    EXPECT_EQ(clf_s_.code(), code_) << #expr << ": " << clf_s_.ToString();  \
  } while (0)

namespace clf::testing {

inline Status ToStatus(const Status& s) { return s; }
template <typename T>
Status ToStatus(const Result<T>& r) { return r.status(); }

// A directory under $TMPDIR (or /tmp) removed with everything in it when the
// object goes away, whatever the test did.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "clf-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// Waiting in tests. A test waits for an event (a server applied a change, a
// lease was recalled, a process started), never for a guessed time: it polls
// what it can observe with WaitUntil. Only where time passing is itself what
// is tested (a TTL, a cache or lease expiry, a window in which something must
// NOT happen) does it call WaitPast, with a comment naming what expires.

// Polls `cond` every `poll` until it holds: true, or false once `timeout`
// passed without it holding (checked one last time at the deadline).
bool WaitUntil(const std::function<bool()>& cond, std::chrono::milliseconds timeout,
               std::chrono::milliseconds poll = std::chrono::milliseconds(10));

// Lets `d` of wall time pass.
void WaitPast(std::chrono::milliseconds d);

}  // namespace clf::testing
