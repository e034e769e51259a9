#include "fuse/ops_util.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "common/posix_access.h"

namespace clf::fuse {

using client::FileType;

mode_t TypeBits(FileType t) {
  switch (t) {
    case FileType::kRegular: return S_IFREG;
    case FileType::kDirectory: return S_IFDIR;
    case FileType::kSymlink: return S_IFLNK;
    case FileType::kFifo: return S_IFIFO;
    case FileType::kSocket: return S_IFSOCK;
    case FileType::kChar: return S_IFCHR;
    case FileType::kBlock: return S_IFBLK;
    case FileType::kUnknown: break;
  }
  return 0;
}

FileType TypeOfMode(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return FileType::kRegular;
    case S_IFDIR: return FileType::kDirectory;
    case S_IFLNK: return FileType::kSymlink;
    case S_IFIFO: return FileType::kFifo;
    case S_IFSOCK: return FileType::kSocket;
    case S_IFCHR: return FileType::kChar;
    case S_IFBLK: return FileType::kBlock;
    default: return FileType::kUnknown;
  }
}

struct stat ToStat(const client::Attr& a) {
  struct stat st;
  std::memset(&st, 0, sizeof(st));
  st.st_ino = a.handle;
  st.st_mode = TypeBits(a.type) | (a.mode & 07777);
  st.st_nlink = a.nlink;
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  st.st_rdev = a.rdev;
  st.st_size = static_cast<off_t>(a.size);
  st.st_blocks = static_cast<blkcnt_t>(a.blocks);
  // cp, tar and friends size their buffers by st_blksize: one stripe unit
  // (capped at 1 MiB, the largest write the kernel sends) for files.
  st.st_blksize = 4096;
  if (a.type == FileType::kRegular) {
    st.st_blksize = std::min<uint32_t>(std::max<uint32_t>(a.layout.stripe_size, 4096), 1u << 20);
  }
  st.st_atim.tv_sec = a.atime.sec;
  st.st_atim.tv_nsec = a.atime.nsec;
  st.st_mtim.tv_sec = a.mtime.sec;
  st.st_mtim.tv_nsec = a.mtime.nsec;
  st.st_ctim.tv_sec = a.ctime.sec;
  st.st_ctim.tv_nsec = a.ctime.nsec;
  return st;
}

fuse_entry_param ToEntry(const client::Attr& a, const MountOptions& o) {
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.ino = a.handle;
  e.generation = 0;
  e.attr = ToStat(a);
  e.attr_timeout = o.attr_timeout;
  e.entry_timeout = o.entry_timeout;
  return e;
}

client::Caller CallerOf(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  client::Caller c;
  c.uid = ctx->uid;
  c.gid = ctx->gid;
  if (c.uid != 0) {
    // Reads /proc/<tid>/status: only for non-root callers.
    gid_t small[32];
    int n = fuse_req_getgroups(req, 32, small);
    if (n > 32) {
      std::vector<gid_t> big(static_cast<size_t>(n));
      n = fuse_req_getgroups(req, n, big.data());
      if (n > 0) c.groups.assign(big.begin(), big.begin() + std::min<size_t>(n, big.size()));
    } else if (n > 0) {
      c.groups.assign(small, small + n);
    }
  }
  return c;
}

void FloorBehindSize(Mount& m, struct stat* st) {
  if (!S_ISREG(st->st_mode)) return;
  // Bytes this mount acknowledged may not be on the servers yet
  // (write-behind), or M may not know their end yet (reported at close,
  // fsync, truncate): the kernel, which takes a regular file's size from
  // each reply when it has no write-back cache, must not see the file
  // shorter than that.
  const uint64_t end = std::max(m.ns().BehindEnd(st->st_ino), m.inodes().SizeFloor(st->st_ino));
  if (end > static_cast<uint64_t>(st->st_size)) st->st_size = static_cast<off_t>(end);
}

bool Allowed(const Mount& m, const client::Caller& c, const client::Attr& a, uint32_t mask) {
  if (m.options().kernel_permissions) return true;
  return MayAccess(a.mode, a.uid, a.gid, a.type == client::FileType::kDirectory, c.uid, c.gid,
                   c.groups, mask);
}

bool LeasedDirRefuses(Mount& m, fuse_ino_t dir, const client::Caller& c, uint32_t mask) {
  if (m.options().kernel_permissions) return false;
  std::optional<client::Attr> d = m.ns().DirAttr(dir);
  return d && !Allowed(m, c, *d, mask);
}

client::Attr PermAttr(fuse_ino_t ino, const InodeTable::Perm& p) {
  client::Attr a;
  a.handle = ino;
  a.type = p.is_dir ? client::FileType::kDirectory : client::FileType::kRegular;
  a.mode = p.mode;
  a.uid = p.uid;
  a.gid = p.gid;
  a.nlink = p.nlink;
  return a;
}

std::optional<client::Attr> CheckableAttr(Mount& m, fuse_ino_t ino) {
  if (std::optional<client::Attr> d = m.ns().DirAttr(ino)) return d;
  if (std::optional<client::Attr> b = m.ns().Born(ino)) return b;
  std::optional<InodeTable::Perm> p = m.inodes().GetPerm(ino);
  if (!p || InodeTable::Clock::now() - p->seen >= AttrTtl(m)) return std::nullopt;
  return PermAttr(ino, *p);
}

void WithCheckableAttr(fuse_req_t req, Mount& m, fuse_ino_t ino, const client::Caller& c,
                       std::function<void(const client::Attr&)> then) {
  if (std::optional<client::Attr> a = CheckableAttr(m, ino)) return then(*a);
  m.client().GetAttr(ino, c, Completion<client::Attr>(m, req, [req, &m, then](Result<client::Attr> r) {
                       if (!r.ok()) return ReplyStatus(req, r.status(), "access check");
                       m.inodes().Update(*r);
                       then(*r);
                     }));
}

void CheckAccessThen(fuse_req_t req, Mount& m, fuse_ino_t ino, const client::Caller& c,
                     uint32_t mask, std::function<void()> then) {
  if (m.options().kernel_permissions) return then();
  WithCheckableAttr(req, m, ino, c, [req, &m, c, mask, then](const client::Attr& a) {
    if (!Allowed(m, c, a, mask)) return (void)fuse_reply_err(req, EACCES);
    then();
  });
}

double EntryTimeoutIn(Mount& m, fuse_ino_t parent) {
  const double t = m.options().entry_timeout;
  if (m.options().kernel_permissions || t <= 0) return t;
  uint32_t mode = 0;
  if (std::optional<client::Attr> d = m.ns().DirAttr(parent)) {
    mode = d->mode;
  } else if (std::optional<InodeTable::Perm> p = m.inodes().GetPerm(parent)) {
    // Of any age: a chmod made elsewhere shows once the mount sees the
    // directory again (its next lookup, getattr or lease).
    mode = p->mode;
  }
  return (mode & S_IXOTH) != 0 ? t : 0;
}

void ReplyEntry(fuse_req_t req, Mount& m, const client::Attr& a, fuse_ino_t parent,
                bool expired) {
  fuse_entry_param e = ToEntry(a, m.options());
  e.entry_timeout = EntryTimeoutIn(m, parent);
  if (expired) e.attr_timeout = 0;
  FloorBehindSize(m, &e.attr);
  m.inodes().Ref(a);
  if (fuse_reply_entry(req, &e) != 0) m.inodes().Unref(a.handle, 1);  // interrupted
}

void ReplyAttr(fuse_req_t req, Mount& m, const client::Attr& a) {
  struct stat st = ToStat(a);
  FloorBehindSize(m, &st);
  fuse_reply_attr(req, &st, m.options().attr_timeout);
}

void ReplyStatus(fuse_req_t req, const Status& s, std::string_view op) {
  CLF_LOG_DEBUG("{}: {}", op, s.ToString());
  fuse_reply_err(req, ToErrno(s));
}

InodeTable::Clock::duration AttrTtl(const Mount& m) {
  auto ttl = std::chrono::duration<double>(m.options().attr_timeout);
  return std::chrono::duration_cast<InodeTable::Clock::duration>(ttl);
}

uint32_t KillPrivBits(Mount& m, fuse_ino_t ino, const client::Caller& c) {
  uint32_t bits = 0;
  // A file capability is an extended attribute: none to clear when the
  // file's attributes (within their timeout) say it has none.
  if (!m.inodes().CapabilityKnownAbsent(ino) && !m.inodes().NoXattrsKnown(ino, AttrTtl(m))) {
    bits |= client::kKillCaps;
  }
  if (c.uid == 0) return bits;
  // The mode as this mount last saw it (the kernel decided on its cached
  // mode the same way); unknown: the server looks.
  std::optional<uint32_t> mode;
  if (std::optional<client::Attr> b = m.ns().Born(ino)) {
    mode = b->mode;
  } else if (std::optional<InodeTable::Perm> p = m.inodes().GetPerm(ino)) {
    mode = p->mode;
  }
  if (!mode || (*mode & (S_ISUID | S_ISGID)) != 0) {  // the server applies the rule
    bits |= client::kKillSuidGid;
  }
  return bits;
}

InodeTable::Clock::time_point CapabilityHorizon(const Mount& m) {
  return InodeTable::Clock::now() + AttrTtl(m);
}

void DestroyLater(Mount& m, Handle h) {
  CLF_LOG_DEBUG("destroy orphan {:#x}", h);
  m.client().Destroy(h, StatusCompletion(m, nullptr, [h](Status s) {
    if (!s.ok()) CLF_LOG_WARN("destroy of orphan {:#x} failed: {}", h, s.ToString());
  }));
}

bool CheckName(fuse_req_t req, const char* name) {
  if (std::strlen(name) > kMaxNameBytes) {
    fuse_reply_err(req, ENAMETOOLONG);
    return false;
  }
  return true;
}

}  // namespace clf::fuse
