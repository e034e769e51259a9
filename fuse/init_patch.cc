#include "fuse/init_patch.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "common/log.h"
#include "common/transport/zero_copy.h"
#include "fuse/chunk_bytes.h"

namespace clf::fuse {
namespace {

std::atomic<uint32_t> g_armed{0};   // flags to add to the INIT reply
std::atomic<uint32_t> g_armed2{0};  // flags2 (bits 32..63) to add to it
std::atomic<uint32_t> g_max_pages{0};  // max_pages for the INIT reply (0: libfuse's)

#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
constexpr uint64_t FUSE_DIRECT_IO_ALLOW_MMAP = 1ULL << 36;  // protocol 7.39
#endif

thread_local bool t_parallel_writes = false;  // MarkNextOpenParallelWrites

// ReplyNextFromPipe: the pipe holding the next reply's bytes, and how many.
thread_local int t_reply_pipe = -1;
thread_local size_t t_reply_len = 0;
const char g_pipe_marker = 0;
std::atomic<uint64_t> g_spliced{0};
std::atomic<uint64_t> g_spliced_fallbacks{0};

// The thread's pipe for a spliced reply: header, then the bytes (a reply
// its buffers do not fit in is copied instead).
thread_local LocalPipe t_out_pipe(1u << 20);

// The reply (header iov[0], `len` bytes waiting in `src`) to /dev/fuse `fd`.
ssize_t SpliceReply(int fd, const iovec& header, int src, size_t len) {
  const size_t total = header.iov_len + len;
  size_t moved = 0;  // bytes of src now behind the header in the out pipe
  bool header_in = false;
  if (t_out_pipe.Get()) {
    const int pr = t_out_pipe.read_end(), pw = t_out_pipe.write_end();
    header_in = ::write(pw, header.iov_base, header.iov_len) == static_cast<ssize_t>(header.iov_len);
    while (header_in && moved < len) {
      const ssize_t n = ::splice(src, nullptr, pw, nullptr, len - moved, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        moved += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      break;  // the out pipe is full (the bytes sit in many small buffers)
    }
    if (header_in && moved == len) {
      size_t sent = 0;
      while (sent < total) {
        // /dev/fuse takes a reply whole: one splice, or an error.
        const ssize_t n = ::splice(pr, nullptr, fd, nullptr, total - sent, 0);
        if (n > 0) {
          sent += static_cast<size_t>(n);
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        const int err = n < 0 ? errno : EIO;
        DiscardPipe(pr);
        errno = err;
        return -1;
      }
      g_spliced.fetch_add(1, std::memory_order_relaxed);
      return static_cast<ssize_t>(total);
    }
  }
  // Copy: what the out pipe took, then the rest of src, behind the header.
  g_spliced_fallbacks.fetch_add(1, std::memory_order_relaxed);
  std::string bytes(len, '\0');
  bool ok = true;
  if (header_in) {
    char h[sizeof(fuse_out_header)];
    ok = header.iov_len <= sizeof h && transport::EmptyPipe(t_out_pipe.read_end(), header.iov_len, h) &&
         transport::EmptyPipe(t_out_pipe.read_end(), moved, bytes.data());
  }
  ok = ok && transport::EmptyPipe(src, len - moved, bytes.data() + moved);
  if (!ok) {
    CLF_LOG_ERROR("spliced reply: its pipe held fewer than {} bytes", len);
    errno = EIO;
    return -1;
  }
  iovec out[2] = {header, iovec{bytes.data(), len}};
  return ::writev(fd, out, 2);
}

// An OPEN reply's body is a fuse_open_out; a CREATE reply's is a
// fuse_entry_out followed by a fuse_open_out (libfuse writes header and body
// as two pieces). Adds FOPEN_PARALLEL_DIRECT_WRITES when FOPEN_DIRECT_IO is set.
void AddParallelWrites(struct iovec* iov, int count) {
  if (count < 2 || iov[0].iov_len != sizeof(fuse_out_header)) return;
  const auto* h = static_cast<const fuse_out_header*>(iov[0].iov_base);
  if (h->error != 0) return;
  const size_t len = iov[1].iov_len;
  if (len != sizeof(fuse_open_out) && len != sizeof(fuse_entry_out) + sizeof(fuse_open_out)) return;
  auto* out = static_cast<char*>(iov[1].iov_base) + len - sizeof(fuse_open_out);
  uint32_t flags;
  std::memcpy(&flags, out + offsetof(fuse_open_out, open_flags), sizeof(flags));
  if ((flags & FOPEN_DIRECT_IO) == 0) return;
  flags |= FOPEN_PARALLEL_DIRECT_WRITES;
  std::memcpy(out + offsetof(fuse_open_out, open_flags), &flags, sizeof(flags));
}

ssize_t Writev(int fd, struct iovec* iov, int count, void* /*userdata*/) {
  if (t_reply_pipe >= 0) {
    const int src = t_reply_pipe;
    const size_t len = t_reply_len;
    t_reply_pipe = -1;
    if (count == 2 && iov[0].iov_len == sizeof(fuse_out_header) && iov[1].iov_base == &g_pipe_marker &&
        iov[1].iov_len == len) {
      return SpliceReply(fd, iov[0], src, len);
    }
  }
  if (t_parallel_writes) {
    t_parallel_writes = false;
    AddParallelWrites(iov, count);
  }
  // The INIT reply is the only one written while armed (the kernel sends no
  // other request before INIT is answered): header, then fuse_init_out.
  if ((g_armed.load(std::memory_order_acquire) != 0 || g_max_pages.load(std::memory_order_acquire) != 0) &&
      count >= 2 && iov[0].iov_len == sizeof(fuse_out_header) &&
      iov[1].iov_len >= offsetof(fuse_init_out, flags) + sizeof(uint32_t)) {
    const auto* h = static_cast<const fuse_out_header*>(iov[0].iov_base);
    auto* out = static_cast<fuse_init_out*>(iov[1].iov_base);
    const uint32_t max_pages = h->error == 0 ? g_max_pages.exchange(0) : 0;
    if (max_pages != 0 && iov[1].iov_len >= offsetof(fuse_init_out, max_pages) + sizeof(uint16_t)) {
      uint32_t flags;
      std::memcpy(&flags, &out->flags, sizeof(flags));
      // libfuse answered the kernel's FUSE_MAX_PAGES offer with max_write's
      // page count; the kernel clips what we ask to fs.fuse.max_pages_limit.
      if ((flags & FUSE_MAX_PAGES) != 0) {
        const uint16_t pages = static_cast<uint16_t>(max_pages);
        std::memcpy(&out->max_pages, &pages, sizeof(pages));
        CLF_LOG_INFO("requests of up to {} pages: max_pages set in the INIT reply", pages);
      }
    }
    if (const uint32_t add = h->error == 0 ? g_armed.exchange(0) : 0; add != 0) {
      uint32_t flags;
      std::memcpy(&flags, &out->flags, sizeof(flags));
      flags |= add;
      std::memcpy(&out->flags, &flags, sizeof(flags));
      if (add & FUSE_PARALLEL_DIROPS) {
        CLF_LOG_INFO("parallel dirops on: FUSE_PARALLEL_DIROPS set in the INIT reply");
      }
      if (add & FUSE_HANDLE_KILLPRIV_V2) {
        CLF_LOG_INFO("kill-priv by the mount: FUSE_HANDLE_KILLPRIV_V2 set in the INIT reply");
      }
      const uint32_t add2 = g_armed2.exchange(0);
      if (add2 != 0 && (flags & FUSE_INIT_EXT) != 0 &&
          iov[1].iov_len >= offsetof(fuse_init_out, flags2) + sizeof(uint32_t)) {
        uint32_t flags2;
        std::memcpy(&flags2, &out->flags2, sizeof(flags2));
        flags2 |= add2;
        std::memcpy(&out->flags2, &flags2, sizeof(flags2));
        CLF_LOG_INFO("shared mmap of direct-I/O opens on: FUSE_DIRECT_IO_ALLOW_MMAP set in the INIT reply");
      }
    }
  }
  return ::writev(fd, iov, count);
}

ssize_t Read(int fd, void* buf, size_t len, void* /*userdata*/) { return ::read(fd, buf, len); }

// Both directions of splice, unchanged.
ssize_t Splice(int fdin, off_t* offin, int fdout, off_t* offout, size_t len, unsigned int flags,
               void* /*userdata*/) {
  return ::splice(fdin, offin, fdout, offout, len, flags);
}

}  // namespace

int InstallInitPatch(fuse_session* se) {
  fuse_custom_io io{};
  io.writev = Writev;
  io.read = Read;
  io.splice_receive = Splice;
  io.splice_send = Splice;
  return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

void ArmParallelDirops() { g_armed.fetch_or(FUSE_PARALLEL_DIROPS, std::memory_order_release); }

void ArmKillPrivV2() { g_armed.fetch_or(FUSE_HANDLE_KILLPRIV_V2, std::memory_order_release); }

void ArmDirectIoAllowMmap() {
  g_armed2.fetch_or(static_cast<uint32_t>(FUSE_DIRECT_IO_ALLOW_MMAP >> 32), std::memory_order_release);
  g_armed.fetch_or(FUSE_INIT_EXT, std::memory_order_release);
}

void ArmMaxPages(uint32_t pages) {
  g_max_pages.store(std::min<uint32_t>(pages, UINT16_MAX), std::memory_order_release);
}

void MarkNextOpenParallelWrites() { t_parallel_writes = true; }

void ReplyNextFromPipe(int pipe_r, size_t len) {
  t_reply_pipe = pipe_r;
  t_reply_len = len;
}

const void* PipeReplyMarker() { return &g_pipe_marker; }

uint64_t spliced_replies() { return g_spliced.load(std::memory_order_relaxed); }
uint64_t spliced_reply_fallbacks() { return g_spliced_fallbacks.load(std::memory_order_relaxed); }

}  // namespace clf::fuse
