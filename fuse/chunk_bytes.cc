#include "fuse/chunk_bytes.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/log.h"
#include "common/transport/zero_copy.h"

namespace clf::fuse {

std::atomic<int> ChunkPipe::alive_{0};
std::atomic<uint64_t> ChunkBytes::piped_replies_{0};
std::atomic<uint64_t> ChunkBytes::drained_{0};
std::atomic<uint64_t> ChunkBytes::not_in_pipe_{0};

namespace {

// Opens a pipe of at least `bytes` capacity; false when the system refuses.
bool OpenPipe(int fds[2], size_t bytes) {
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  const int got = ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(bytes));
  if (got < 0 || static_cast<size_t>(got) < bytes) {
    ::close(fds[0]);
    ::close(fds[1]);
    fds[0] = fds[1] = -1;
    return false;
  }
  return true;
}

// Bytes waiting in a pipe (its read end).
size_t Waiting(int pipe_r) {
  int n = 0;
  return ::ioctl(pipe_r, FIONREAD, &n) == 0 && n > 0 ? static_cast<size_t>(n) : 0;
}

// Drops the first `n` bytes a pipe holds without copying them (splice to
// /dev/null; read out if that fails). False if it held fewer.
bool Drop(int pipe_r, size_t n) {
  static const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  while (n > 0 && null_fd >= 0) {
    const ssize_t d = ::splice(pipe_r, nullptr, null_fd, nullptr, n, SPLICE_F_NONBLOCK);
    if (d > 0) {
      n -= static_cast<size_t>(d);
      continue;
    }
    if (d < 0 && errno == EINTR) continue;
    break;
  }
  return n == 0 || transport::EmptyPipe(pipe_r, n, nullptr);
}

// The replying thread's pipe: tee's target, the reply's source.
thread_local LocalPipe reply_pipe(ChunkPipe::kPipeBytes);

}  // namespace

void DiscardPipe(int pipe_r) { Drop(pipe_r, Waiting(pipe_r)); }

LocalPipe::~LocalPipe() {
  if (fds_[0] >= 0) ::close(fds_[0]);
  if (fds_[1] >= 0) ::close(fds_[1]);
}

bool LocalPipe::Get() {
  if (!tried_) {
    tried_ = true;
    OpenPipe(fds_, bytes_);
  }
  return fds_[0] >= 0;
}

std::unique_ptr<ChunkPipe> ChunkPipe::Make() {
  if (alive_.fetch_add(1, std::memory_order_relaxed) >= kMaxChunkPipes) {
    alive_.fetch_sub(1, std::memory_order_relaxed);
    return nullptr;
  }
  std::unique_ptr<ChunkPipe> p(new ChunkPipe());
  if (!OpenPipe(p->fds_, kPipeBytes)) return nullptr;  // the destructor uncounts it
  return p;
}

ChunkPipe::~ChunkPipe() {
  if (fds_[0] >= 0) ::close(fds_[0]);
  if (fds_[1] >= 0) ::close(fds_[1]);
  alive_.fetch_sub(1, std::memory_order_relaxed);
}

bool PipesUsable() {
  static const bool usable = [] {
    int a[2];
    if (!OpenPipe(a, ChunkPipe::kPipeBytes)) {
      CLF_LOG_INFO("read replies from pipes: off (a pipe of {} bytes is refused)", ChunkPipe::kPipeBytes);
      return false;
    }
    ::close(a[0]);
    ::close(a[1]);
    return true;
  }();
  return usable;
}

ChunkBytes::ChunkBytes(std::string mem, Recycle recycle)
    : mem_(std::move(mem)), length_(mem_.size()), recycle_(std::move(recycle)) {}

ChunkBytes::ChunkBytes(std::unique_ptr<ChunkPipe> pipe, uint64_t length, std::string spare,
                       Recycle recycle)
    : mem_(std::move(spare)), pipe_(std::move(pipe)), length_(length), recycle_(std::move(recycle)) {}

ChunkBytes::~ChunkBytes() {
  if (recycle_ && !mem_.empty()) recycle_(std::move(mem_));
}

bool ChunkBytes::in_pipe() const {
  std::lock_guard<std::mutex> l(mu_);
  return pipe_ != nullptr;
}

void ChunkBytes::DrainLocked() const {
  if (pipe_ == nullptr) return;
  // Recycled memory is reused as it is (it is overwritten, not zero-filled).
  if (mem_.size() != length_) mem_.resize(length_);
  if (!transport::EmptyPipe(pipe_->read_end(), length_, mem_.data())) {
    // Not expected: the pipe holds length_ bytes. Never hand out garbage.
    CLF_LOG_ERROR("read-ahead chunk: its pipe held fewer than {} bytes", length_);
    broken_ = true;
  }
  pipe_.reset();
  drained_.fetch_add(1, std::memory_order_relaxed);
}

const char* ChunkBytes::data() const {
  std::lock_guard<std::mutex> l(mu_);
  DrainLocked();
  return broken_ ? nullptr : mem_.data();
}

bool ChunkBytes::SendFromPipes(const std::vector<Span>& spans,
                               const std::function<void(int pipe_r)>& send) {
  if (spans.empty()) return false;
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    if (s.chunk == nullptr || s.len == 0 || s.off + s.len > s.chunk->length_ || (i > 0 && s.off != 0)) {
      return false;
    }
  }
  // The chunks' locks in file order (every sender takes them in that order).
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(spans.size());
  for (const Span& s : spans) {
    locks.emplace_back(s.chunk->mu_);
    if (s.chunk->pipe_ == nullptr) return false;
  }
  if (!reply_pipe.Get()) return false;
  const int rr = reply_pipe.read_end(), rw = reply_pipe.write_end();
  size_t want = 0;  // bytes the reply pipe should hold
  for (size_t i = 0; i < spans.size(); ++i) {
    const Span& s = spans[i];
    // Duplicate the chunk's first off+len bytes behind what the reply pipe
    // holds (its buffers gain a reference; nothing is copied, and the chunk's
    // pipe keeps them). tee takes from the start of the pipe, so one call
    // takes what fits: less means the reply pipe is full.
    const size_t n = s.off + s.len;
    ssize_t got;
    do {
      got = ::tee(s.chunk->pipe_->read_end(), rw, n, SPLICE_F_NONBLOCK);
    } while (got < 0 && errno == EINTR);
    if (got != static_cast<ssize_t>(n)) {
      DiscardPipe(rr);
      return false;
    }
    want += n;
    if (i == 0 && s.off > 0) {
      // Drop the first span's leading bytes (the front of the reply pipe).
      if (!Drop(rr, s.off)) {
        DiscardPipe(rr);
        return false;
      }
      want -= s.off;
    }
  }
  if (Waiting(rr) != want) {  // not expected: never send other bytes
    DiscardPipe(rr);
    return false;
  }
  send(rr);
  DiscardPipe(rr);  // whatever `send` left
  piped_replies_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace clf::fuse
