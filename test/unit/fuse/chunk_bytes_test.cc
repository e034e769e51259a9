// ChunkBytes over real pipes: a chunk whose bytes wait in a pipe hands out
// any range of them through the thread's reply pipe (the chunk keeps them),
// reads them out into memory once asked for memory, and then never uses the
// pipe again; a chunk in memory never offers a pipe; a chunk's memory goes
// back to its recycler; ChunkPipe stops at its limit.
#include "fuse/chunk_bytes.h"

#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

namespace clf::fuse {
namespace {

std::string Pattern(size_t len, int seed) {
  std::string s(len, '\0');
  for (size_t i = 0; i < len; ++i) s[i] = static_cast<char>('A' + (i * 31 + i / 4096 + seed) % 57);
  return s;
}

// A chunk pipe holding `bytes`, written in pieces of `piece` bytes (many
// pipe buffers, as a socket's splice leaves them).
std::unique_ptr<ChunkPipe> Filled(const std::string& bytes, size_t piece) {
  std::unique_ptr<ChunkPipe> p = ChunkPipe::Make();
  if (p == nullptr) return nullptr;
  for (size_t at = 0; at < bytes.size(); at += piece) {
    const size_t n = std::min(piece, bytes.size() - at);
    if (::write(p->write_end(), bytes.data() + at, n) != static_cast<ssize_t>(n)) return nullptr;
  }
  return p;
}

// Everything a pipe holds (its read end), without blocking.
std::string Drain(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

TEST(ChunkBytesTest, RangesComeFromThePipeAndTheChunkKeepsItsBytes) {
  ASSERT_TRUE(PipesUsable());
  const std::string bytes = Pattern(ChunkPipe::kPipeBytes, 1);
  std::unique_ptr<ChunkPipe> pipe = Filled(bytes, 32 * 1024);
  ASSERT_NE(pipe, nullptr);
  ChunkBytes c(std::move(pipe), bytes.size(), std::string(), nullptr);
  ASSERT_TRUE(c.in_pipe());
  const uint64_t before = ChunkBytes::piped_replies();
  struct Range {
    uint64_t off, len;
  };
  // The whole chunk, its tail, a middle range, the head again, one byte.
  for (const Range r : std::vector<Range>{{0, bytes.size()},
                                          {bytes.size() - 16, 16},
                                          {12345, 300000},
                                          {0, 4096},
                                          {bytes.size() - 1, 1}}) {
    std::string got;
    ASSERT_TRUE(ChunkBytes::SendFromPipes({{&c, r.off, r.len}}, [&](int fd) { got = Drain(fd); }))
        << r.off << "+" << r.len;
    EXPECT_EQ(got, bytes.substr(r.off, r.len)) << r.off << "+" << r.len;
    EXPECT_TRUE(c.in_pipe());
  }
  EXPECT_EQ(ChunkBytes::piped_replies(), before + 5);
  // A send that leaves bytes behind does not spill into the next one.
  ASSERT_TRUE(ChunkBytes::SendFromPipes({{&c, 0, 100000}}, [](int) {}));
  std::string got;
  ASSERT_TRUE(ChunkBytes::SendFromPipes({{&c, 5, 10}}, [&](int fd) { got = Drain(fd); }));
  EXPECT_EQ(got, bytes.substr(5, 10));
  // Out of range: nothing sent.
  EXPECT_FALSE(ChunkBytes::SendFromPipes({{&c, bytes.size() - 10, 11}}, [](int) { ADD_FAILURE() << "sent"; }));
  EXPECT_FALSE(ChunkBytes::SendFromPipes({{&c, 0, 0}}, [](int) { ADD_FAILURE() << "sent"; }));

  // Memory: the pipe is read out once, and the chunk is in memory from then on.
  const uint64_t drained = ChunkBytes::drained();
  const char* d = c.data();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(std::string(d, bytes.size()), bytes);
  EXPECT_FALSE(c.in_pipe());
  EXPECT_EQ(ChunkBytes::drained(), drained + 1);
  EXPECT_EQ(c.data(), d);
  EXPECT_FALSE(ChunkBytes::SendFromPipes({{&c, 0, 4096}}, [](int) { ADD_FAILURE() << "sent from a drained chunk"; }));
}

TEST(ChunkBytesTest, AReadOverConsecutiveChunksComesFromTheirPipes) {
  const std::string a = Pattern(600000, 5), b = Pattern(300000, 6);
  std::unique_ptr<ChunkPipe> pa = Filled(a, 32 * 1024), pb = Filled(b, 32 * 1024);
  ASSERT_NE(pa, nullptr);
  ASSERT_NE(pb, nullptr);
  ChunkBytes ca(std::move(pa), a.size(), std::string(), nullptr),
      cb(std::move(pb), b.size(), std::string(), nullptr);
  // The tail of a from 12345, then the head of b.
  std::string got;
  ASSERT_TRUE(ChunkBytes::SendFromPipes({{&ca, 12345, a.size() - 12345}, {&cb, 0, 123456}},
                                        [&](int fd) { got = Drain(fd); }));
  EXPECT_EQ(got, a.substr(12345) + b.substr(0, 123456));
  // More page-sized buffers than the replying thread's pipe holds: nothing
  // is sent (the caller replies from memory), and the chunks keep their bytes.
  const std::string big = Pattern(ChunkPipe::kPipeBytes, 7);
  std::unique_ptr<ChunkPipe> pbig = Filled(big, 4096);
  ASSERT_NE(pbig, nullptr);
  ChunkBytes cbig(std::move(pbig), big.size(), std::string(), nullptr);
  EXPECT_FALSE(ChunkBytes::SendFromPipes({{&cbig, 4096, big.size() - 4096}, {&cb, 0, 8192}},
                                         [](int) { ADD_FAILURE() << "sent"; }));
  ASSERT_TRUE(ChunkBytes::SendFromPipes({{&cbig, 100, 5000}}, [&](int fd) { got = Drain(fd); }));
  EXPECT_EQ(got, big.substr(100, 5000));
  // A later span must start at its chunk's start.
  EXPECT_FALSE(ChunkBytes::SendFromPipes({{&ca, a.size() - 10, 10}, {&cb, 5, 10}},
                                         [](int) { ADD_FAILURE() << "sent"; }));
  // A chunk already in memory: nothing from the pipes.
  ASSERT_NE(cb.data(), nullptr);
  EXPECT_FALSE(ChunkBytes::SendFromPipes({{&ca, a.size() - 10, 10}, {&cb, 0, 10}},
                                         [](int) { ADD_FAILURE() << "sent"; }));
  // Both chunks still answer from memory.
  EXPECT_EQ(std::string(ca.data(), a.size()), a);
  EXPECT_EQ(std::string(cb.data(), b.size()), b);
}

TEST(ChunkBytesTest, AChunkInMemoryOffersNoPipeAndGoesBackToItsRecycler) {
  std::vector<std::string> recycled;
  {
    ChunkBytes c(Pattern(5000, 2), [&](std::string s) { recycled.push_back(std::move(s)); });
    EXPECT_FALSE(c.in_pipe());
    EXPECT_FALSE(ChunkBytes::SendFromPipes({{&c, 0, 100}}, [](int) { ADD_FAILURE() << "sent"; }));
    EXPECT_EQ(std::string(c.data(), 5000), Pattern(5000, 2));
  }
  ASSERT_EQ(recycled.size(), 1u);
  EXPECT_EQ(recycled[0], Pattern(5000, 2));
  // A piped chunk's memory (once read out) is recycled too.
  recycled.clear();
  {
    std::unique_ptr<ChunkPipe> pipe = Filled(Pattern(70000, 3), 4096);
    ASSERT_NE(pipe, nullptr);
    ChunkBytes c(std::move(pipe), 70000, std::string(),
                 [&](std::string s) { recycled.push_back(std::move(s)); });
    EXPECT_EQ(std::string(c.data(), 70000), Pattern(70000, 3));
  }
  ASSERT_EQ(recycled.size(), 1u);
  // A spare buffer given with the pipe is what the bytes are read into, and
  // it is recycled whether or not they were.
  recycled.clear();
  {
    std::string spare(ChunkPipe::kPipeBytes, '\0');
    const char* memory = spare.data();
    std::unique_ptr<ChunkPipe> pipe = Filled(Pattern(70000, 4), 4096);
    ASSERT_NE(pipe, nullptr);
    ChunkBytes c(std::move(pipe), 70000, std::move(spare),
                 [&](std::string s) { recycled.push_back(std::move(s)); });
    EXPECT_EQ(c.data(), memory);
    EXPECT_EQ(std::string(c.data(), 70000), Pattern(70000, 4));
  }
  {
    std::unique_ptr<ChunkPipe> pipe = Filled(Pattern(70000, 5), 4096);
    ASSERT_NE(pipe, nullptr);
    ChunkBytes c(std::move(pipe), 70000, std::string(ChunkPipe::kPipeBytes, '\0'),
                 [&](std::string s) { recycled.push_back(std::move(s)); });
  }
  ASSERT_EQ(recycled.size(), 2u);
}

TEST(ChunkBytesTest, APipeHoldingTooFewBytesGivesNoData) {
  std::unique_ptr<ChunkPipe> pipe = Filled(Pattern(1000, 4), 1000);
  ASSERT_NE(pipe, nullptr);
  ChunkBytes c(std::move(pipe), 2000, std::string(), nullptr);  // says 2000, holds 1000
  EXPECT_EQ(c.data(), nullptr);
  EXPECT_EQ(c.data(), nullptr);
}

TEST(ChunkBytesTest, ChunkPipesStopAtTheLimit) {
  const int alive = ChunkPipe::alive();
  std::vector<std::unique_ptr<ChunkPipe>> pipes;
  for (int i = alive; i < ChunkPipe::kMaxChunkPipes; ++i) {
    pipes.push_back(ChunkPipe::Make());
    ASSERT_NE(pipes.back(), nullptr) << i;
  }
  EXPECT_EQ(ChunkPipe::Make(), nullptr);
  EXPECT_EQ(ChunkPipe::alive(), ChunkPipe::kMaxChunkPipes);
  pipes.pop_back();
  EXPECT_NE(ChunkPipe::Make(), nullptr);
  pipes.clear();
  EXPECT_EQ(ChunkPipe::alive(), alive);
}

}  // namespace
}  // namespace clf::fuse
