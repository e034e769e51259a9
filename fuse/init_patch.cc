#include "fuse/init_patch.h"

#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "common/log.h"

namespace clf::fuse {
namespace {

std::atomic<uint32_t> g_armed{0};  // flags to add to the INIT reply

ssize_t Writev(int fd, struct iovec* iov, int count, void* /*userdata*/) {
  // The INIT reply is the only one written while armed (the kernel sends no
  // other request before INIT is answered): header, then fuse_init_out.
  if (g_armed.load(std::memory_order_acquire) != 0 && count >= 2 &&
      iov[0].iov_len == sizeof(fuse_out_header) && iov[1].iov_len >= offsetof(fuse_init_out, flags) + sizeof(uint32_t)) {
    const auto* h = static_cast<const fuse_out_header*>(iov[0].iov_base);
    if (const uint32_t add = h->error == 0 ? g_armed.exchange(0) : 0; add != 0) {
      auto* out = static_cast<fuse_init_out*>(iov[1].iov_base);
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

}  // namespace clf::fuse
