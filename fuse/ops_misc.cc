// init (capabilities), statfs, access, and MakeOps() wiring every handler.
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "fuse/init_patch.h"
#include "fuse/ops_util.h"

namespace clf::fuse {
namespace ops {

void Init(void* userdata, fuse_conn_info* conn) {
  Mount& m = *static_cast<Mount*>(userdata);
  auto want = [conn](unsigned cap) {
    if (conn->capable & cap) conn->want |= cap;
  };
  want(FUSE_CAP_ASYNC_READ);
  want(FUSE_CAP_PARALLEL_DIROPS);
  // libfuse 3.14 drops this flag from its INIT reply; init_patch puts it back.
  if (conn->want & FUSE_CAP_PARALLEL_DIROPS) ArmParallelDirops();
  // Kernels that speak 7.33 offer FUSE_HANDLE_KILLPRIV_V2 (libfuse 3.14 does
  // not pass the offer on): the mount clears what writes must (ops_file.cc).
  if (conn->proto_major > 7 || (conn->proto_major == 7 && conn->proto_minor >= 33)) {
    ArmKillPrivV2();
    m.set_kill_priv(true);
  }
  // Writers of one file in parallel (MountOptions::parallel_writes): opens
  // for writing are direct I/O, and shared mmap of them must keep working,
  // which needs FUSE_DIRECT_IO_ALLOW_MMAP (7.39).
  // Read-only opens of large files (MountOptions::direct_read_min) are direct
  // I/O too, under the same condition.
  if ((m.options().parallel_writes || m.options().direct_read_min != 0) && !m.options().writeback &&
      (conn->proto_major > 7 || (conn->proto_major == 7 && conn->proto_minor >= 39))) {
    ArmDirectIoAllowMmap();
    m.set_direct_mmap(true);
    m.set_parallel_writes(m.options().parallel_writes);
  }
  if (m.options().max_pages != 0) ArmMaxPages(m.options().max_pages);
  want(FUSE_CAP_AUTO_INVAL_DATA);
  want(FUSE_CAP_CACHE_SYMLINKS);  // symlink targets never change
  // Always readdirplus: a page of entries with attributes costs the servers
  // one batched stat, while plain readdir makes `ls -l`, `rm -rf` and tar
  // follow with one lookup per name.
  want(FUSE_CAP_READDIRPLUS);
  conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
  if (m.options().writeback) {
    want(FUSE_CAP_WRITEBACK_CACHE);
  } else {
    conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  }
  // The kernel applies the umask (no POSIX ACLs here), truncates O_TRUNC
  // opens with setattr, and clears setuid bits itself (it sends the setattr).
  conn->want &= ~(FUSE_CAP_DONT_MASK | FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_HANDLE_KILLPRIV |
                  FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE |
                  FUSE_CAP_EXPORT_SUPPORT | FUSE_CAP_POSIX_ACL);
  conn->max_write = 1u << 20;
  conn->max_readahead = 1u << 20;  // main raised the bdi window to match
  // Writeback and readahead keep many requests in flight; the servers take
  // them in parallel.
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  conn->time_gran = 1;
  CLF_LOG_INFO("fuse init: proto {}.{}, capable {:#x}, want {:#x}, max_write {}, writeback {}",
               conn->proto_major, conn->proto_minor, conn->capable, conn->want, conn->max_write,
               (conn->want & FUSE_CAP_WRITEBACK_CACHE) != 0);
}

void StatFs(fuse_req_t req, fuse_ino_t /*ino*/) {
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("statfs");
  // At most a second old (StatFsCache): one cluster-wide fetch a second.
  auto fetch = [&m](StatFsCache::Reply done) {
    m.client().StatFs(Completion<client::StatFs>(m, nullptr, std::move(done)));
  };
  m.statfs().Get(fetch, [req](Result<client::StatFs> r) {
    if (!r.ok()) return ReplyStatus(req, r.status(), "statfs");
    constexpr uint64_t kBlock = 4096;
    struct statvfs st;
    std::memset(&st, 0, sizeof(st));
    st.f_bsize = kBlock;
    st.f_frsize = kBlock;
    st.f_blocks = r->bytes_total / kBlock;
    st.f_bfree = r->bytes_free / kBlock;
    st.f_bavail = r->bytes_free / kBlock;
    st.f_files = r->files;
    st.f_ffree = r->files_free;
    st.f_favail = r->files_free;
    st.f_namemax = kMaxNameBytes;
    fuse_reply_statfs(req, &st);
  });
}

// access(2), chdir: called when the kernel does not check permissions itself
// (no -o default_permissions), with the server's current attributes.
void Access(fuse_req_t req, fuse_ino_t ino, int mask) {
  Mount& m = MountOf(req);
  client::Caller c = CallerOf(req);
  CLF_LOG_DEBUG("access {:#x} mask {}", ino, mask);
  m.client().GetAttr(ino, c, Completion<client::Attr>(m, req, [req, &m, mask, c](Result<client::Attr> r) {
                       if (!r.ok()) return ReplyStatus(req, r.status(), "access");
                       m.inodes().Update(*r);
                       if (mask == F_OK) return (void)fuse_reply_err(req, 0);
                       fuse_reply_err(req, Allowed(m, c, *r, static_cast<uint32_t>(mask)) ? 0 : EACCES);
                     }));
}

}  // namespace ops

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops o;
  std::memset(&o, 0, sizeof(o));
  o.init = ops::Init;
  o.lookup = Guard<ops::Lookup>::Call;
  o.forget = ops::Forget;
  o.forget_multi = ops::ForgetMulti;
  o.getattr = Guard<ops::GetAttr>::Call;
  o.setattr = Guard<ops::SetAttr>::Call;
  o.readlink = Guard<ops::Readlink>::Call;
  o.mknod = Guard<ops::Mknod>::Call;
  o.mkdir = Guard<ops::Mkdir>::Call;
  o.unlink = Guard<ops::Unlink>::Call;
  o.rmdir = Guard<ops::Rmdir>::Call;
  o.symlink = Guard<ops::Symlink>::Call;
  o.rename = Guard<ops::Rename>::Call;
  o.link = Guard<ops::Link>::Call;
  o.open = Guard<ops::Open>::Call;
  o.create = Guard<ops::Create>::Call;
  o.read = Guard<ops::Read>::Call;
  o.write = Guard<ops::Write>::Call;
  o.write_buf = Guard<ops::WriteBuf>::Call;  // libfuse prefers it over write
  o.flush = Guard<ops::Flush>::Call;
  o.release = Guard<ops::Release>::Call;
  o.fsync = Guard<ops::Fsync>::Call;
  o.opendir = Guard<ops::Opendir>::Call;
  o.readdir = Guard<ops::Readdir>::Call;
  o.readdirplus = Guard<ops::Readdirplus>::Call;
  o.releasedir = Guard<ops::Releasedir>::Call;
  o.fsyncdir = Guard<ops::Fsyncdir>::Call;
  o.statfs = Guard<ops::StatFs>::Call;
  o.setxattr = Guard<ops::SetXattr>::Call;
  o.getxattr = Guard<ops::GetXattr>::Call;
  o.listxattr = Guard<ops::ListXattr>::Call;
  o.removexattr = Guard<ops::RemoveXattr>::Call;
  o.access = Guard<ops::Access>::Call;
  o.getlk = Guard<ops::GetLk>::Call;
  o.setlk = Guard<ops::SetLk>::Call;
  o.flock = Guard<ops::Flock>::Call;
  return o;
}

}  // namespace clf::fuse
