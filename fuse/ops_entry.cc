// Namespace handlers: lookup, forget, attributes, create-like calls, remove,
// rename, links.
//
// Open-unlink: when any file of this mount is open, removes and renames ask
// the server to keep an orphan (keep_orphan) instead of freeing the data at
// nlink 0. If the orphan is open here, its last release destroys it;
// otherwise it is destroyed at once. With nothing open (rm -rf, untar) no
// extra RPC is made.
#include <cstdio>  // RENAME_NOREPLACE, RENAME_EXCHANGE
#include <cstring>
#include <string>

#include "common/config.h"
#include "fuse/ops_util.h"

namespace clf::fuse::ops {

using client::Attr;
using client::FileType;
using client::RemoveResult;

namespace {

// After a remove or a rename that replaced its target.
void AfterRemove(Mount& m, const RemoveResult& rr) {
  if (rr.handle == 0) return;
  if (!rr.orphaned) return m.inodes().NoteUnlinked(rr.handle);
  if (!m.inodes().MarkOrphanIfOpen(rr.handle)) DestroyLater(m, rr.handle);
}

void CreateNode(fuse_req_t req, fuse_ino_t parent, const char* name, client::CreateArgs args,
                const char* op) {
  if (!CheckName(req, name)) return;
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("{} {:#x} {}", op, parent, name);
  m.client().Create(parent, name, std::move(args), CallerOf(req),
                    Completion<Attr>(m, req, [req, &m, op](Result<Attr> r) {
                      if (!r.ok()) return ReplyStatus(req, r.status(), op);
                      ReplyEntry(req, m, *r);
                    }));
}

}  // namespace

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (!CheckName(req, name)) return;
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("lookup {:#x} {}", parent, name);
  m.client().Lookup(parent, name, CallerOf(req),
                    Completion<Attr>(m, req, [req, &m](Result<Attr> r) {
                      if (r.ok()) return ReplyEntry(req, m, *r);
                      if (r.status().code() != Code::kNotFound || m.options().negative_timeout <= 0) {
                        return ReplyStatus(req, r.status(), "lookup");
                      }
                      fuse_entry_param e;
                      std::memset(&e, 0, sizeof(e));
                      e.ino = 0;  // the kernel caches the miss for entry_timeout
                      e.entry_timeout = m.options().negative_timeout;
                      fuse_reply_entry(req, &e);
                    }));
}

void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) noexcept {
  MountOf(req).inodes().Unref(ino, nlookup);
  fuse_reply_none(req);
}

void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) noexcept {
  InodeTable& t = MountOf(req).inodes();
  for (size_t i = 0; i < count; ++i) t.Unref(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* /*fi*/) {
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("getattr {:#x}", ino);
  m.client().GetAttr(ino, CallerOf(req), Completion<Attr>(m, req, [req, &m](Result<Attr> r) {
                       if (!r.ok()) return ReplyStatus(req, r.status(), "getattr");
                       m.inodes().Update(*r);
                       ReplyAttr(req, m, *r);
                     }));
}

void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  Mount& m = MountOf(req);
  client::SetAttrArgs a;
  // libfuse passes fi when the kernel names the open file (FATTR_FH: ftruncate);
  // the kernel checked that it is open for writing.
  if (fi != nullptr) a.valid |= client::kSetViaOpenFile;
  if (to_set & FUSE_SET_ATTR_MODE) {
    a.valid |= client::kSetMode;
    a.mode = attr->st_mode & 07777;
  }
  if (to_set & FUSE_SET_ATTR_UID) {
    a.valid |= client::kSetUid;
    a.uid = attr->st_uid;
  }
  if (to_set & FUSE_SET_ATTR_GID) {
    a.valid |= client::kSetGid;
    a.gid = attr->st_gid;
  }
  const bool truncate = (to_set & FUSE_SET_ATTR_SIZE) != 0;
  if (truncate) {
    if (attr->st_size < 0) return (void)fuse_reply_err(req, EINVAL);
    a.valid |= client::kSetSize;
    a.size = static_cast<uint64_t>(attr->st_size);
  }
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
    a.valid |= client::kSetAtimeNow;
  } else if (to_set & FUSE_SET_ATTR_ATIME) {
    a.valid |= client::kSetAtime;
    a.atime = {attr->st_atim.tv_sec, static_cast<uint32_t>(attr->st_atim.tv_nsec)};
  }
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
    a.valid |= client::kSetMtimeNow;
  } else if (to_set & FUSE_SET_ATTR_MTIME) {
    a.valid |= client::kSetMtime;
    a.mtime = {attr->st_mtim.tv_sec, static_cast<uint32_t>(attr->st_mtim.tv_nsec)};
  }
  CLF_LOG_DEBUG("setattr {:#x} valid {:#x}", ino, a.valid);
  // Times written back for an inode whose last name we removed: the kernel
  // ignores the answer, the server would only say ESTALE.
  if (m.inodes().Gone(ino)) return (void)fuse_reply_err(req, ENOENT);
  if ((a.valid & ~client::kSetViaOpenFile) == 0) return GetAttr(req, ino, nullptr);  // ctime only
  const uint64_t size = a.size;
  const client::Caller caller = CallerOf(req);
  auto send = [req, &m, ino, truncate, size, caller](client::SetAttrArgs args) {
    m.client().SetAttr(ino, args, caller,
                       Completion<Attr>(m, req, [req, &m, ino, truncate, size](Result<Attr> r) {
                         if (!r.ok()) return ReplyStatus(req, r.status(), "setattr");
                         if (truncate) m.inodes().SetSize(ino, size);
                         m.inodes().NoteOwnChange(*r);
                         ReplyAttr(req, m, *r);
                       }));
  };
  // An explicit time from a caller who is not root: with the writeback cache
  // the kernel sends "now" (touch, or mtime after a write) as an explicit
  // time. default_permissions already refused explicit times to non-owners,
  // so for a non-owner every time here means "now": ask who owns the file.
  if ((a.valid & (client::kSetAtime | client::kSetMtime)) == 0 || caller.uid == 0) return send(a);
  m.client().GetAttr(ino, caller,
                     Completion<Attr>(m, req, [req, a, caller, send](Result<Attr> r) mutable {
                       if (!r.ok()) return ReplyStatus(req, r.status(), "setattr");
                       if (r->uid != caller.uid) {
                         if (a.valid & client::kSetAtime)
                           a.valid = (a.valid & ~client::kSetAtime) | client::kSetAtimeNow;
                         if (a.valid & client::kSetMtime)
                           a.valid = (a.valid & ~client::kSetMtime) | client::kSetMtimeNow;
                       }
                       send(a);
                     }));
}

void Mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev) {
  client::CreateArgs args;
  args.type = TypeOfMode(mode);
  if (args.type == FileType::kUnknown || args.type == FileType::kDirectory ||
      args.type == FileType::kSymlink) {
    return (void)fuse_reply_err(req, EINVAL);
  }
  args.mode = mode & 07777;  // the kernel applied the umask
  args.rdev = rdev;
  CreateNode(req, parent, name, std::move(args), "mknod");
}

void Mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  client::CreateArgs args;
  args.type = FileType::kDirectory;
  args.mode = mode & 07777;
  CreateNode(req, parent, name, std::move(args), "mkdir");
}

void Symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  if (std::strlen(link) > kMaxSymlinkBytes) return (void)fuse_reply_err(req, ENAMETOOLONG);
  client::CreateArgs args;
  args.type = FileType::kSymlink;
  args.mode = 0777;
  args.symlink_target = link;
  CreateNode(req, parent, name, std::move(args), "symlink");
}

void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (!CheckName(req, name)) return;
  Mount& m = MountOf(req);
  const bool keep_orphan = m.inodes().AnyOpen();
  CLF_LOG_DEBUG("unlink {:#x} {} keep_orphan={}", parent, name, keep_orphan);
  m.client().Remove(parent, name, false, keep_orphan, CallerOf(req),
                    Completion<RemoveResult>(m, req, [req, &m](Result<RemoveResult> r) {
                      if (!r.ok()) return ReplyStatus(req, r.status(), "unlink");
                      AfterRemove(m, *r);
                      fuse_reply_err(req, 0);
                    }));
}

void Rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (!CheckName(req, name)) return;
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("rmdir {:#x} {}", parent, name);
  m.client().Remove(parent, name, true, false, CallerOf(req),
                    Completion<RemoveResult>(m, req, [req](Result<RemoveResult> r) {
                      if (!r.ok()) return ReplyStatus(req, r.status(), "rmdir");
                      fuse_reply_err(req, 0);
                    }));
}

void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
            const char* newname, unsigned int flags) {
  if (!CheckName(req, name) || !CheckName(req, newname)) return;
  if ((flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) != 0 ||
      (flags & RENAME_NOREPLACE && flags & RENAME_EXCHANGE)) {
    return (void)fuse_reply_err(req, EINVAL);  // RENAME_WHITEOUT is not supported
  }
  Mount& m = MountOf(req);
  uint32_t cflags = 0;
  if (flags & RENAME_NOREPLACE) cflags |= 1;
  if (flags & RENAME_EXCHANGE) cflags |= 2;
  const bool keep_orphan = m.inodes().AnyOpen();
  CLF_LOG_DEBUG("rename {:#x} {} -> {:#x} {} flags {}", parent, name, newparent, newname, flags);
  m.client().Rename(parent, name, newparent, newname, cflags, keep_orphan, CallerOf(req),
                    Completion<RemoveResult>(m, req, [req, &m](Result<RemoveResult> r) {
                      if (!r.ok()) return ReplyStatus(req, r.status(), "rename");
                      AfterRemove(m, *r);
                      fuse_reply_err(req, 0);
                    }));
}

void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  if (!CheckName(req, newname)) return;
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("link {:#x} -> {:#x} {}", ino, newparent, newname);
  m.client().Link(ino, newparent, newname, CallerOf(req),
                  Completion<Attr>(m, req, [req, &m](Result<Attr> r) {
                    if (!r.ok()) return ReplyStatus(req, r.status(), "link");
                    ReplyEntry(req, m, *r);
                  }));
}

void Readlink(fuse_req_t req, fuse_ino_t ino) {
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("readlink {:#x}", ino);
  m.client().Readlink(ino, CallerOf(req),
                      Completion<std::string>(m, req, [req](Result<std::string> r) {
                        if (!r.ok()) return ReplyStatus(req, r.status(), "readlink");
                        fuse_reply_readlink(req, r->c_str());
                      }));
}

}  // namespace clf::fuse::ops
