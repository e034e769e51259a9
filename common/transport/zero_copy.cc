#include "common/transport/zero_copy.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace clf::transport {

SplicePipe::~SplicePipe() {
  if (fds_[0] >= 0) ::close(fds_[0]);
  if (fds_[1] >= 0) ::close(fds_[1]);
}

Status SplicePipe::Open(size_t want) {
  if (fds_[0] >= 0) return Status::Ok();
  if (::pipe2(fds_, O_CLOEXEC) != 0) return FromErrno(errno, "pipe for splice");
  // A bigger pipe moves a request in fewer splices; the default (64 KiB) still
  // works when /proc/sys/fs/pipe-max-size is lower.
  const int got = ::fcntl(fds_[1], F_SETPIPE_SZ, static_cast<int>(want));
  capacity_ = got > 0 ? static_cast<size_t>(got) : static_cast<size_t>(::fcntl(fds_[1], F_GETPIPE_SZ));
  if (capacity_ == 0) capacity_ = 4096;
  return Status::Ok();
}

bool EmptyPipe(int pipe_r, size_t n, char* to) {
  char scratch[64 * 1024];
  while (n > 0) {
    char* dst = to != nullptr ? to : scratch;
    const size_t want = to != nullptr ? n : std::min(n, sizeof scratch);
    const ssize_t got = ::read(pipe_r, dst, want);
    if (got > 0) {
      n -= static_cast<size_t>(got);
      if (to != nullptr) to += got;
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    return false;  // the pipe held fewer (a non-blocking one), or an error
  }
  return true;
}

SpliceOutcome SpliceSocketToPipe(int sock, int pipe_w, int pipe_r, uint64_t len,
                                 tcp::Clock::time_point deadline, int stop_fd, std::string* buf,
                                 Status* status) {
  *status = Status::Ok();
  // A splice from a socket takes whole socket buffers, so a pipe of N bytes
  // may hold fewer: when it is full with bytes still waiting on the socket,
  // the payload goes to *buf.
  uint64_t in_pipe = 0;
  // As tcp::ReadvFull: each time bytes move, the deadline moves with them.
  const tcp::Clock::duration span =
      std::max(tcp::Clock::duration::zero(), deadline - tcp::Clock::now());
  while (in_pipe < len) {
    const ssize_t n = ::splice(sock, nullptr, pipe_w, nullptr, static_cast<size_t>(len - in_pipe),
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      in_pipe += static_cast<uint64_t>(n);
      deadline = std::max(deadline, tcp::Clock::now() + span);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int waiting = 0;
      if (::ioctl(sock, FIONREAD, &waiting) == 0 && waiting > 0) {  // the pipe is full
        buf->resize(len);
        EmptyPipe(pipe_r, static_cast<size_t>(in_pipe), buf->data());
        Status rest = tcp::ReadFull(tcp::Link{sock}, buf->data() + in_pipe, static_cast<size_t>(len - in_pipe),
                                    deadline, stop_fd);
        if (rest.ok()) return SpliceOutcome::kBuffered;
        *status = rest;
        return rest.code() == Code::kTimedOut ? SpliceOutcome::kTimedOut : SpliceOutcome::kClosed;
      }
      Status w = tcp::WaitSocket(sock, POLLIN, deadline, stop_fd);
      if (w.ok()) continue;
      EmptyPipe(pipe_r, static_cast<size_t>(in_pipe), nullptr);
      *status = w;
      return w.code() == Code::kTimedOut ? SpliceOutcome::kTimedOut : SpliceOutcome::kClosed;
    }
    EmptyPipe(pipe_r, static_cast<size_t>(in_pipe), nullptr);
    *status = n == 0 ? Unavailable("data channel: connection closed by peer mid-frame")
                     : tcp::SocketStatus(errno, "read");
    return SpliceOutcome::kClosed;
  }
  return SpliceOutcome::kDone;
}

SpliceOutcome SpliceFrameToFile(int sock, SplicePipe& pipe, int fd, const std::vector<Extent>& extents,
                                uint64_t len, tcp::Clock::time_point deadline, int stop_fd,
                                std::string* buf, Status* status) {
  // 1. The whole payload into the pipe (no copy), or into *buf.
  const SpliceOutcome in =
      SpliceSocketToPipe(sock, pipe.write_end(), pipe.read_end(), len, deadline, stop_fd, buf, status);
  if (in != SpliceOutcome::kDone) return in;
  // 2. From the pipe into the object, extent by extent.
  uint64_t left_in_pipe = len;
  for (const Extent& e : extents) {
    uint64_t left = e.length;
    loff_t off = static_cast<loff_t>(e.offset);
    while (left > 0) {
      const ssize_t out = ::splice(pipe.read_end(), nullptr, fd, &off, static_cast<size_t>(left), SPLICE_F_MOVE);
      if (out > 0) {
        left -= static_cast<uint64_t>(out);
        left_in_pipe -= static_cast<uint64_t>(out);
        continue;
      }
      if (out < 0 && errno == EINTR) continue;
      *status = out < 0 ? FromErrno(errno, "write data object") : IoError("write data object: no progress");
      EmptyPipe(pipe.read_end(), static_cast<size_t>(left_in_pipe), nullptr);
      return SpliceOutcome::kDone;
    }
  }
  return SpliceOutcome::kDone;
}

}  // namespace clf::transport
