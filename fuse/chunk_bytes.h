// ChunkBytes: the bytes of one read-ahead chunk (fuse/read_windows.h), in
// memory or still in a pipe.
//
// A chunk fetched from the TCP data channel over a plaintext connection
// arrives by splice: socket -> pipe, no copy (Client::ReadToPipe). A read
// that the chunk answers is then replied to from the pipe: `tee` duplicates
// the chunk's pipe buffers into the replying thread's pipe (no copy, and the
// chunk keeps its bytes for any other read of them), and the reply goes to
// /dev/fuse by splice (fuse/init_patch.h ReplyNextFromPipe), where the
// kernel makes the one copy into the reader's buffer. Against recvmsg into
// memory and writev to /dev/fuse this saves the copy out of the socket and
// the pinning of the mount's buffer pages on every reply.
//
// The pipe path needs pipes of a whole chunk (1 MiB, F_SETPIPE_SZ within
// /proc/sys/fs/pipe-max-size); PipesUsable checks once. Where they are
// refused, or a chunk's bytes did not fit in its pipe, chunks are in memory
// as before.
//
// Thread safety: every method is thread safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace clf::fuse {

// A pipe for one chunk's bytes, sized to hold kPipeBytes (F_SETPIPE_SZ), or
// none: at most kMaxChunkPipes exist at once (each pins the pages it holds).
class ChunkPipe {
 public:
  static constexpr size_t kPipeBytes = 1u << 20;
  static constexpr int kMaxChunkPipes = 64;
  // A new empty pipe, or null (the limit is reached, or the system refuses).
  static std::unique_ptr<ChunkPipe> Make();
  ~ChunkPipe();
  ChunkPipe(const ChunkPipe&) = delete;
  ChunkPipe& operator=(const ChunkPipe&) = delete;
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }
  static int alive() { return alive_.load(std::memory_order_relaxed); }

 private:
  ChunkPipe() = default;
  int fds_[2] = {-1, -1};
  static std::atomic<int> alive_;
};

// A pipe of at least `bytes` made on first use, or none when the system
// refuses one that large; closed with the object. For thread_local pipes
// (the replying thread's: chunk_bytes.cc, init_patch.cc).
class LocalPipe {
 public:
  explicit LocalPipe(size_t bytes) : bytes_(bytes) {}
  ~LocalPipe();
  LocalPipe(const LocalPipe&) = delete;
  LocalPipe& operator=(const LocalPipe&) = delete;
  bool Get();  // true when the pipe exists (made on the first call)
  int read_end() const { return fds_[0]; }
  int write_end() const { return fds_[1]; }

 private:
  const size_t bytes_;
  int fds_[2] = {-1, -1};
  bool tried_ = false;
};

// Drops whatever a pipe holds (its read end), without copying it.
void DiscardPipe(int pipe_r);

// True when this process can make pipes of a chunk (checked once).
bool PipesUsable();

class ChunkBytes {
 public:
  // Memory that goes back to `recycle` (may be empty) when the chunk is gone.
  using Recycle = std::function<void(std::string)>;
  ChunkBytes(std::string mem, Recycle recycle);
  // `length` bytes waiting in `pipe` (nothing else in it); `spare` (may be
  // empty) is the memory they are read into if they must be, recycled too.
  ChunkBytes(std::unique_ptr<ChunkPipe> pipe, uint64_t length, std::string spare, Recycle recycle);
  ~ChunkBytes();
  ChunkBytes(const ChunkBytes&) = delete;
  ChunkBytes& operator=(const ChunkBytes&) = delete;

  uint64_t size() const { return length_; }
  // The bytes in memory. The first call on a chunk in a pipe reads the pipe
  // (one copy) and the chunk is in memory from then on. Null if the pipe
  // held fewer bytes than it should (never expected; the read gets EIO).
  const char* data() const;
  bool in_pipe() const;

  // Sends a read's bytes from the chunks' pipes with `send`, which gets the
  // read end of a pipe holding exactly those bytes (the thread's reply pipe)
  // and replies from it (ReplyNextFromPipe); returns true once `send` ran.
  // The spans are the read's pieces in file order: the first may start
  // anywhere in its chunk, every later one at its chunk's start (as
  // consecutive chunks do). Returns false, having done nothing, when a chunk
  // is not in a pipe (the caller replies from data() instead) or the bytes
  // could not be duplicated. Whatever `send` left in the pipe is dropped.
  struct Span {
    const ChunkBytes* chunk = nullptr;
    uint64_t off = 0;
    uint64_t len = 0;
  };
  static bool SendFromPipes(const std::vector<Span>& spans, const std::function<void(int pipe_r)>& send);

  // Replies sent from pipes and chunks read out of their pipe into memory,
  // process-wide (tests and metrics).
  static uint64_t piped_replies() { return piped_replies_.load(std::memory_order_relaxed); }
  static uint64_t drained() { return drained_.load(std::memory_order_relaxed); }
  // Chunks fetched for a pipe whose bytes came in memory instead (the range
  // spans servers, the transport does not splice, the pipe overflowed).
  static void NoteNotInPipe() { not_in_pipe_.fetch_add(1, std::memory_order_relaxed); }
  static uint64_t not_in_pipe() { return not_in_pipe_.load(std::memory_order_relaxed); }

 private:
  void DrainLocked() const;  // pipe -> mem_ (under mu_)

  mutable std::mutex mu_;
  mutable std::string mem_;
  mutable std::unique_ptr<ChunkPipe> pipe_;
  mutable bool broken_ = false;  // the pipe held too few bytes
  const uint64_t length_;
  Recycle recycle_;
  static std::atomic<uint64_t> piped_replies_;
  static std::atomic<uint64_t> drained_;
  static std::atomic<uint64_t> not_in_pipe_;
};

}  // namespace clf::fuse
