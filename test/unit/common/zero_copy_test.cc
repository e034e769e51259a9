// The data channel's splice path (common/transport/zero_copy.h) over a real
// socket pair and a real file: whole payloads land at their extents' offsets;
// a payload the pipe cannot hold goes to the buffer; a peer that stops or
// closes mid-payload changes nothing in the file.
#include "common/transport/zero_copy.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "test/support/test_util.h"

namespace clf::transport {
namespace {

class ZeroCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv_), 0);
    file_ = ::open((dir_.str() + "/object").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(file_, 0);
    ASSERT_EQ(::pwrite(file_, std::string(8192, '.').data(), 8192, 0), 8192);
  }
  void TearDown() override {
    ::close(sv_[0]);
    if (sv_[1] >= 0) ::close(sv_[1]);
    ::close(file_);
  }
  std::string FileBytes() {
    std::string s(8192, '\0');
    EXPECT_EQ(::pread(file_, s.data(), s.size(), 0), 8192);
    return s;
  }
  void Send(const std::string& bytes) {
    ASSERT_EQ(::send(sv_[1], bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  static tcp::Clock::time_point In(int ms) { return tcp::Clock::now() + std::chrono::milliseconds(ms); }

  clf::testing::TempDir dir_;
  int sv_[2] = {-1, -1};
  int file_ = -1;
};

TEST_F(ZeroCopyTest, WholePayloadLandsAtEachExtent) {
  SplicePipe pipe;
  ASSERT_TRUE(pipe.Open().ok());
  Send("hello" "WORLD!");
  std::string buf;
  Status st;
  const SpliceOutcome o =
      SpliceFrameToFile(sv_[0], pipe, file_, {{100, 5}, {4000, 6}}, 11, In(2000), -1, &buf, &st);
  ASSERT_EQ(o, SpliceOutcome::kDone);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const std::string f = FileBytes();
  EXPECT_EQ(f.substr(100, 5), "hello");
  EXPECT_EQ(f.substr(4000, 6), "WORLD!");
  EXPECT_EQ(f.substr(0, 100), std::string(100, '.'));
  EXPECT_TRUE(buf.empty());
}

TEST_F(ZeroCopyTest, PayloadThePipeCannotHoldGoesToTheBuffer) {
  SplicePipe pipe;
  ASSERT_TRUE(pipe.Open(4096).ok());  // one page: one socket buffer per slot
  ASSERT_LE(pipe.capacity(), 4096u);
  // Many small sends: each is its own socket buffer, so the one-slot pipe
  // fills after the first while bytes still wait on the socket.
  std::string payload;
  for (int i = 0; i < 40; ++i) {
    const std::string piece(50, static_cast<char>('a' + i % 26));
    payload += piece;
    Send(piece);
  }
  std::string buf;
  Status st;
  const SpliceOutcome o = SpliceFrameToFile(sv_[0], pipe, file_, {{0, payload.size()}}, payload.size(),
                                            In(2000), -1, &buf, &st);
  ASSERT_EQ(o, SpliceOutcome::kBuffered) << st.ToString();
  EXPECT_EQ(buf, payload);
  EXPECT_EQ(FileBytes(), std::string(8192, '.')) << "the fallback wrote to the file itself";
}

TEST_F(ZeroCopyTest, StalledPeerChangesNothing) {
  SplicePipe pipe;
  ASSERT_TRUE(pipe.Open().ok());
  Send("abc");  // of 10
  std::string buf;
  Status st;
  const SpliceOutcome o = SpliceFrameToFile(sv_[0], pipe, file_, {{0, 10}}, 10, In(300), -1, &buf, &st);
  EXPECT_EQ(o, SpliceOutcome::kTimedOut);
  EXPECT_EQ(st.code(), Code::kTimedOut);
  EXPECT_EQ(FileBytes(), std::string(8192, '.'));
}

TEST_F(ZeroCopyTest, PeerClosingMidPayloadChangesNothing) {
  SplicePipe pipe;
  ASSERT_TRUE(pipe.Open().ok());
  Send("abcdef");  // of 10
  ::close(sv_[1]);
  sv_[1] = -1;
  std::string buf;
  Status st;
  const SpliceOutcome o = SpliceFrameToFile(sv_[0], pipe, file_, {{0, 10}}, 10, In(2000), -1, &buf, &st);
  EXPECT_EQ(o, SpliceOutcome::kClosed);
  EXPECT_EQ(FileBytes(), std::string(8192, '.'));
  // The pipe is empty again: the next frame starts clean.
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  ASSERT_EQ(::send(fds[1], "XY", 2, MSG_NOSIGNAL), 2);
  ASSERT_EQ(SpliceFrameToFile(fds[0], pipe, file_, {{7, 2}}, 2, In(2000), -1, &buf, &st), SpliceOutcome::kDone);
  EXPECT_EQ(FileBytes().substr(5, 6), "..XY..");
  ::close(fds[0]);
  ::close(fds[1]);
}

}  // namespace
}  // namespace clf::transport
