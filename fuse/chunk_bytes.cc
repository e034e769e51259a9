#include "fuse/chunk_bytes.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/log.h"

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

// Drops what a pipe holds, without copying it.
void Discard(int pipe_r) {
  static const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  for (size_t n = Waiting(pipe_r); n > 0; n = Waiting(pipe_r)) {
    const ssize_t got = null_fd >= 0 ? ::splice(pipe_r, nullptr, null_fd, nullptr, n, SPLICE_F_NONBLOCK) : -1;
    if (got > 0) continue;
    if (got < 0 && errno == EINTR) continue;
    char scratch[64 * 1024];
    if (::read(pipe_r, scratch, std::min(n, sizeof scratch)) <= 0) return;
  }
}

// The replying thread's pipe: tee's target, the reply's source.
thread_local LocalPipe reply_pipe(ChunkPipe::kPipeBytes);

}  // namespace

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

ChunkBytes::ChunkBytes(std::unique_ptr<ChunkPipe> pipe, uint64_t length, Recycle recycle)
    : pipe_(std::move(pipe)), length_(length), recycle_(std::move(recycle)) {}

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
  size_t got = 0;
  while (got < length_) {
    const ssize_t n = ::read(pipe_->read_end(), mem_.data() + got, length_ - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // Not expected: the pipe holds length_ bytes. Never hand out garbage.
    CLF_LOG_ERROR("read-ahead chunk: its pipe held {} of {} bytes", got, length_);
    broken_ = true;
    break;
  }
  pipe_.reset();
  drained_.fetch_add(1, std::memory_order_relaxed);
}

const char* ChunkBytes::data() const {
  std::lock_guard<std::mutex> l(mu_);
  DrainLocked();
  return broken_ ? nullptr : mem_.data();
}

bool ChunkBytes::SendFromPipe(uint64_t off, uint64_t len,
                              const std::function<void(int pipe_r)>& send) const {
  return SendFromPipes({Span{this, off, len}}, send);
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
  Discard(rr);  // whatever a failed send left
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
      Discard(rr);
      return false;
    }
    want += n;
    if (i == 0 && s.off > 0) {
      // Drop the first span's leading bytes (the front of the reply pipe).
      static const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
      size_t dropped = 0;
      while (null_fd >= 0 && dropped < s.off) {
        const ssize_t d = ::splice(rr, nullptr, null_fd, nullptr, s.off - dropped, SPLICE_F_NONBLOCK);
        if (d > 0) {
          dropped += static_cast<size_t>(d);
          continue;
        }
        if (d < 0 && errno == EINTR) continue;
        break;
      }
      if (dropped != s.off) {
        Discard(rr);
        return false;
      }
      want -= s.off;
    }
  }
  if (Waiting(rr) != want) {  // not expected: never send other bytes
    Discard(rr);
    return false;
  }
  send(rr);
  if (Waiting(rr) != 0) Discard(rr);
  piped_replies_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace clf::fuse
