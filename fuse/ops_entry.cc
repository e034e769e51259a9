// Namespace handlers: lookup, forget, attributes, create-like calls, remove,
// rename, links.
//
// Open-unlink: when any file of this mount is open, removes and renames ask
// the server to keep an orphan (keep_orphan) instead of freeing the data at
// nlink 0. If the orphan is open here, its last release destroys it;
// otherwise it is destroyed at once. With nothing open (rm -rf, untar) no
// extra RPC is made.
#include <cstdio>  // RENAME_NOREPLACE, RENAME_EXCHANGE
#include <algorithm>
#include <cstring>
#include <string>

#include "common/config.h"
#include "fuse/ops_util.h"

namespace clf::fuse::ops {

using client::Attr;
using client::FileType;
using client::RemoveResult;

void SetAttrWith(fuse_req_t req, fuse_ino_t ino, client::SetAttrArgs a, bool truncate,
                 client::Caller caller);

namespace {

// A file's attributes kept here, with the size this mount's writes reached.
Attr WithLocalSize(Mount& m, Attr a) {
  if (a.type == FileType::kRegular) {
    if (std::optional<InodeTable::FileInfo> f = m.inodes().GetFile(a.handle)) {
      a.size = std::max(a.size, f->known_size);
    }
  }
  return a;
}

// After a remove or a rename that replaced its target.
void AfterRemove(Mount& m, const RemoveResult& rr) {
  if (rr.handle == 0) return;
  // Its link count is the server's now: neither what this mount kept of a
  // file created here nor a listing's count is answered.
  m.ns().NoteLinkCountChanged(rr.handle);
  if (!rr.orphaned) return m.inodes().NoteUnlinked(rr.handle);
  if (!m.inodes().MarkOrphanIfOpen(rr.handle)) DestroyLater(m, rr.handle);
}

// A directory `name` in `parent` told to the kernel, whose names it keeps for
// no time: remembered so the next walk through it is answered here.
void NoteWalk(Mount& m, fuse_ino_t parent, const std::string& name, const Attr& a) {
  if (a.type != FileType::kDirectory || m.options().kernel_permissions) return;
  if (EntryTimeoutIn(m, parent) <= 0) m.walks().Note(parent, name, a.handle);
}

void CreateNode(fuse_req_t req, fuse_ino_t parent, const char* name, client::CreateArgs args,
                const char* op) {
  if (!CheckName(req, name)) return;
  Mount& m = MountOf(req);
  std::string n(name);
  // After this mount's queued changes of the name (a queued unlink of it) or
  // of the directory's attributes (its mode decides the server's check);
  // queued creates of other names in it (tar: the files before a mkdir) do
  // not matter to the server's answer.
  if (m.ns().NameQueued(parent, n) && m.ns().After({parent}, [req, parent, n, args, op]() mutable {
        CreateNode(req, parent, n.c_str(), std::move(args), op);
      })) {
    return;
  }
  CLF_LOG_DEBUG("{} {:#x} {}", op, parent, name);
  client::Caller caller = CallerOf(req);
  m.client().Create(parent, n, std::move(args), caller,
                    Completion<Attr>(m, req, [req, &m, op, parent, n, caller](Result<Attr> r) {
                      if (!r.ok()) return ReplyStatus(req, r.status(), op);
                      // A new node (mkdir, mknod, symlink: exclusive): the
                      // server gave the directory the node's ctime.
                      m.ns().NoteAdded(parent, n, r->handle, r->type, r->ctime);
                      NoteWalk(m, parent, n, *r);
                      ReplyEntry(req, m, *r, parent);
                      if (r->type == FileType::kDirectory) m.ns().PrefetchForCreate(r->handle, caller);
                    }));
}

void ReplyNegative(fuse_req_t req, Mount& m, fuse_ino_t parent) {
  if (m.options().negative_timeout <= 0 || EntryTimeoutIn(m, parent) <= 0) {
    return (void)fuse_reply_err(req, ENOENT);
  }
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.ino = 0;  // the kernel caches the miss for entry_timeout
  e.entry_timeout = m.options().negative_timeout;
  fuse_reply_entry(req, &e);
}

void UnlinkNow(fuse_req_t req, Mount& m, fuse_ino_t parent, const std::string& name,
               const client::Caller& caller);

void UnlinkSync(fuse_req_t req, fuse_ino_t parent, std::string name, client::Caller caller) {
  Mount& m = MountOf(req);
  // After every deferred change and write-behind (the file's own writes must
  // land before its data is freed; its name may be a queued create).
  m.ns().Flush([req, &m, parent, name, caller] { UnlinkNow(req, m, parent, name, caller); });
}

void UnlinkNow(fuse_req_t req, Mount& m, fuse_ino_t parent, const std::string& name,
               const client::Caller& caller) {
  const bool keep_orphan = m.inodes().AnyOpen();
  CLF_LOG_DEBUG("unlink {:#x} {} keep_orphan={}", parent, name, keep_orphan);
  m.client().Remove(parent, name, false, keep_orphan, caller,
                    Completion<RemoveResult>(m, req, [req, &m, parent, name, caller](Result<RemoveResult> r) {
                      if (!r.ok()) return ReplyStatus(req, r.status(), "unlink");
                      m.ns().NoteRemoved(parent, name);
                      AfterRemove(m, *r);
                      fuse_reply_err(req, 0);
                      m.ns().RenewLapsed(parent, caller);
                    }));
}


void LookupOnServer(fuse_req_t req, Mount& m, fuse_ino_t parent, const std::string& n) {
  CLF_LOG_DEBUG("lookup {:#x} {}", parent, n);
  const auto sent = std::chrono::steady_clock::now();
  m.client().Lookup(parent, n, CallerOf(req),
                    Completion<Attr>(m, req, [req, &m, parent, n, sent](Result<Attr> r) {
                      // The file has a setattr of this mount's still queued
                      // (a file created here, then moved): the server's
                      // attributes are from before it; ask again after it.
                      if (r.ok() && m.ns().AfterAttrs(r->handle, [req, &m, parent, n] {
                            LookupOnServer(req, m, parent, n);
                          })) {
                        return;
                      }
                      // ... or one queued and committed while this lookup
                      // was on its way (the server may have read the file
                      // before the commit): ask again.
                      if (r.ok() && m.ns().AttrsChangedSince(r->handle, sent)) {
                        CLF_LOG_DEBUG("lookup {:#x} {}: changed here meanwhile, again", parent, n);
                        return LookupOnServer(req, m, parent, n);
                      }
                      if (r.ok()) {
                        NoteWalk(m, parent, n, *r);
                        // Its link count may count a name this mount unlinked.
                        const bool expired = r->type != FileType::kDirectory &&
                                             m.ns().NlinkChangedSince(r->handle, sent);
                        return ReplyEntry(req, m, *r, parent, expired);
                      }
                      if (r.status().code() != Code::kNotFound) {
                        return ReplyStatus(req, r.status(), "lookup");
                      }
                      ReplyNegative(req, m, parent);
                    }));
}

// The walk through subdirectory `child` of `parent` (Lookup), answered with
// what this mount saw of it, already expired (a stat asks again); the
// caller's search permission on `parent` is checked here (its attributes
// fetched if this mount's are older than the attribute timeout). Only
// directories: a regular file's stale size would bound the kernel's reads.
// The server's answer, after this mount's queued changes it depends on: a
// name the lease lists (`listed`) depends on queued changes of that file
// only (not, say, the deferred rmdir of a sibling), any other on the
// directory's.
// The directory's queued setattrs always count: the server checks the
// caller's search permission with the directory's mode and owner.
void LookupAfterQueue(fuse_req_t req, Mount& m, fuse_ino_t parent, const std::string& n,
                      Handle listed) {
  auto again = [req, &m, parent, n, listed] { LookupAfterQueue(req, m, parent, n, listed); };
  if (listed != 0 ? m.ns().AfterBesidesUnlinks(listed, again) : m.ns().After({parent}, again)) {
    return;
  }
  if (listed != 0 && m.ns().AfterAttrs(parent, again)) return;
  LookupOnServer(req, m, parent, n);
}

void AnswerWalk(fuse_req_t req, Mount& m, fuse_ino_t parent, const std::string& n, Handle child,
                Handle listed) {
  client::Caller caller = CallerOf(req);
  WithCheckableAttr(req, m, parent, caller, [req, &m, parent, n, child, caller, listed](const Attr& dir) {
    if (!Allowed(m, caller, dir, kMayExec)) return (void)fuse_reply_err(req, EACCES);
    std::optional<InodeTable::Perm> p = m.inodes().GetPerm(child);
    if (!p || !p->is_dir || !m.inodes().RefKnown(child)) {
      return LookupAfterQueue(req, m, parent, n, listed);
    }
    Attr a = PermAttr(child, *p);
    a.nlink = std::max<uint32_t>(a.nlink, 2);
    CLF_LOG_DEBUG("lookup {:#x} {}: subdirectory known here", parent, n);
    fuse_entry_param e = ToEntry(a, m.options());
    e.attr_timeout = 0;
    e.entry_timeout = EntryTimeoutIn(m, parent);
    if (fuse_reply_entry(req, &e) != 0) m.inodes().Unref(child, 1);
  });
}
}  // namespace

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (!CheckName(req, name)) return;
  Mount& m = MountOf(req);
  // Under a directory lease this mount knows the complete listing.
  Attr born;
  Handle listed = 0;
  FileType listed_type = FileType::kUnknown;
  AsyncNs::Known known = m.ns().Find(parent, name, &born, &listed, &listed_type);
  if (known != AsyncNs::Known::kUnknown && !m.options().kernel_permissions) {
    // Answered here: the search permission too (the server checks its own
    // lookups, which is where a lease given back meanwhile sends it).
    std::optional<Attr> dir = m.ns().DirAttr(parent);
    if (!dir) {
      known = AsyncNs::Known::kUnknown;
    } else if (!Allowed(m, CallerOf(req), *dir, kMayExec)) {
      return (void)fuse_reply_err(req, EACCES);
    }
  }
  switch (known) {
    case AsyncNs::Known::kAbsent:
      CLF_LOG_DEBUG("lookup {:#x} {}: absent (lease)", parent, name);
      return ReplyNegative(req, m, parent);
    case AsyncNs::Known::kPresent:
      CLF_LOG_DEBUG("lookup {:#x} {}: created here (lease)", parent, name);
      NoteWalk(m, parent, name, born);
      return ReplyEntry(req, m, WithLocalSize(m, born), parent);
    case AsyncNs::Known::kListed: {
      // The name and file are current (the lease); the attributes are the
      // grant's, so the kernel gets them already expired: anything that
      // needs them (stat, a permission check) asks again.
      CLF_LOG_DEBUG("lookup {:#x} {}: listed (lease)", parent, name);
      fuse_entry_param e = ToEntry(born, m.options());
      e.attr_timeout = 0;
      e.entry_timeout = EntryTimeoutIn(m, parent);
      NoteWalk(m, parent, name, born);
      m.inodes().Ref(born);
      if (fuse_reply_entry(req, &e) != 0) m.inodes().Unref(born.handle, 1);
      return;
    }
    case AsyncNs::Known::kUnknown:
      break;
  }
  std::string n(name);
  // A subdirectory the lease lists, or one this mount told the kernel about
  // less than an entry timeout ago (WalkCache), in a directory whose names
  // the kernel keeps for no time (EntryTimeoutIn): the walk through it,
  // answered here with the search permission checked on every walk. No
  // server is asked, so queued changes in it (tar's creates) need not be
  // committed first.
  if (!m.options().kernel_permissions) {
    Handle walked = listed_type == FileType::kDirectory ? listed : 0;
    if (walked == 0) walked = m.walks().Find(parent, n).value_or(0);
    if (walked != 0) return AnswerWalk(req, m, parent, n, walked, listed);
  }
  m.ns().RenewLapsed(parent, CallerOf(req));
  LookupAfterQueue(req, m, parent, n, listed);
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
  // A leased directory, or a file created here under a lease: this mount's
  // attributes are the current ones (another client's change recalls the lease).
  if (std::optional<Attr> d = m.ns().DirAttr(ino)) {
    CLF_LOG_DEBUG("getattr {:#x}: leased, mode {:o} uid {}", ino, d->mode, d->uid);
    return ReplyAttr(req, m, *d);
  }
  if (std::optional<Attr> b = m.ns().Born(ino)) {
    CLF_LOG_DEBUG("getattr {:#x}: created here, mode {:o} uid {}", ino, b->mode, b->uid);
    return ReplyAttr(req, m, WithLocalSize(m, *b));
  }
  if (m.ns().After({ino}, [req, ino] { GetAttr(req, ino, nullptr); })) return;
  m.ns().RenewLapsed(ino, CallerOf(req));
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
    m.windows().Drop(ino);
    if (attr->st_size < 0) return (void)fuse_reply_err(req, EINVAL);
    a.valid |= client::kSetSize;
    a.size = static_cast<uint64_t>(attr->st_size);
    if (m.kill_priv()) a.valid |= KillPrivBits(m, ino, CallerOf(req));
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
  if ((a.valid & ~client::kSetViaOpenFile) == 0) {
    // Nothing named: chown(f, -1, -1) (or a ctime the kernel keeps). A
    // chown of a non-directory still clears setuid and setgid (the kernel
    // leaves that to the file system under FUSE_HANDLE_KILLPRIV_V2).
    std::optional<InodeTable::Perm> p = m.inodes().GetPerm(ino);
    if (m.ns().DirAttr(ino) || (p && p->is_dir)) return GetAttr(req, ino, nullptr);
    a.valid |= client::kChownNothing;
  }
  // Times set after writes this mount has not reported yet (tar: write,
  // futimens, close): the report goes first, so the mtime it sets on M
  // (the writes') does not replace the one asked for now.
  const client::Caller caller = CallerOf(req);
  if ((a.valid & (client::kSetMtime | client::kSetMtimeNow)) && m.inodes().HasUnreported(ino)) {
    return ReportWrites(m, ino, caller, [req, ino, a, truncate, caller](Status s) {
      if (!s.ok()) return ReplyStatus(req, s, "setattr");
      SetAttrWith(req, ino, a, truncate, caller);
    });
  }
  SetAttrWith(req, ino, a, truncate, caller);
}

namespace {

// Sends a setattr to M and answers the kernel. A truncate goes after this
// mount's size reports on their way to M (M keeps the largest end reported:
// one arriving after the truncate would undo it) and settles the end of
// writes M has not heard of (the size it sets is exact), both decided in one
// step with the reports (BeginTruncate).
void SendSetAttr(fuse_req_t req, fuse_ino_t ino, client::SetAttrArgs args, bool truncate,
                 client::Caller caller) {
  Mount& m = MountOf(req);
  InodeTable::TruncateTicket ticket;
  if (truncate) {
    std::optional<InodeTable::TruncateTicket> t =
        m.inodes().BeginTruncate(ino, [req, ino, args, caller] {
          SendSetAttr(req, ino, args, true, caller);
        });
    if (!t) return;
    ticket = *t;
  }
  const uint64_t size = args.size;
  // A chown clears a file capability too (the server does it).
  const bool kill_caps = (args.valid & (client::kKillCaps | client::kSetUid | client::kSetGid |
                                        client::kChownNothing)) != 0;
  m.inodes().NoteChangeSent(ino);
  m.client().SetAttr(ino, args, caller,
                     Completion<Attr>(m, req, [req, &m, ino, truncate, size, ticket,
                                               kill_caps](Result<Attr> r) {
                       if (truncate) {
                         m.inodes().TruncateDone(ino, ticket,
                                                 r.ok() ? std::optional(size) : std::nullopt);
                       }
                       if (!r.ok()) return ReplyStatus(req, r.status(), "setattr");
                       if (kill_caps) m.inodes().SetCapabilityAbsent(ino, CapabilityHorizon(m));
                       m.inodes().NoteOwnChange(*r);
                       m.ns().NoteAttrChanged(ino, *r);
                       ReplyAttr(req, m, *r);
                     }));
}

}  // namespace

void SetAttrWith(fuse_req_t req, fuse_ino_t ino, client::SetAttrArgs a, bool truncate,
                 client::Caller caller) {
  Mount& m = MountOf(req);
  // A file created here under a lease still held: answered here, queued.
  Attr local;
  if (m.ns().QueueSetAttr(ino, a, caller, &local)) {
    local = WithLocalSize(m, local);
    m.inodes().NoteChangeSent(ino);
    m.inodes().NoteOwnChange(local);
    return ReplyAttr(req, m, local);
  }
  if (m.ns().After({ino}, [req, ino, a, truncate, caller] {
        SetAttrWith(req, ino, a, truncate, caller);
      })) {
    return;
  }
  // A truncate goes after this mount's writes still in flight.
  if (truncate && m.ns().AfterWrites(ino, [req, ino, a, truncate, caller] {
        SetAttrWith(req, ino, a, truncate, caller);
      })) {
    return;
  }
  m.ns().Forget(ino);  // the server's answer is the file's state from now on
  auto send = [req, ino, truncate, caller](client::SetAttrArgs args) {
    SendSetAttr(req, ino, std::move(args), truncate, caller);
  };
  // An explicit time from a caller who is not root: with the writeback cache
  // the kernel sends "now" (touch, or mtime after a write) as an explicit
  // time. The kernel's default_permissions already refused explicit times to
  // non-owners, so for a non-owner every time here means "now": ask who owns
  // the file. Without either, a time is what the caller asked for (the
  // server refuses an explicit time to a non-owner).
  if ((a.valid & (client::kSetAtime | client::kSetMtime)) == 0 || caller.uid == 0 ||
      !m.options().writeback || !m.options().kernel_permissions) {
    return send(a);
  }
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
  if (!CheckName(req, name)) return;
  Mount& m = MountOf(req);
  const client::Caller caller = CallerOf(req);
  m.ns().WithLease(parent, caller, true,
                   [req, &m, parent, n = std::string(name), target = std::string(link),
                    caller](bool held) {
                     if (held && LeasedDirRefuses(m, parent, caller, kMayWrite | kMayExec)) {
                       return (void)fuse_reply_err(req, EACCES);
                     }
                     // A new name in a leased directory: answered here,
                     // committed later, as a regular file's create.
                     if (held) {
                       if (std::optional<Attr> a = m.ns().Symlink(parent, n, target, caller)) {
                         CLF_LOG_DEBUG("symlink {:#x} {}: deferred (lease), handle {:#x}", parent,
                                       n, a->handle);
                         return ReplyEntry(req, m, *a, parent);
                       }
                     }
                     client::CreateArgs args;
                     args.type = FileType::kSymlink;
                     args.mode = 0777;
                     args.symlink_target = target;
                     CreateNode(req, parent, n.c_str(), std::move(args), "symlink");
                   });
}

void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (!CheckName(req, name)) return;
  Mount& m = MountOf(req);
  std::string n(name);
  m.walks().Forget(parent, n);
  client::Caller caller = CallerOf(req);
  m.ns().WithLease(parent, caller, false, [req, &m, parent, n, caller](bool held) {
    if (held && LeasedDirRefuses(m, parent, caller, kMayWrite | kMayExec)) {
      return (void)fuse_reply_err(req, EACCES);
    }
    if (held) {
      std::optional<Handle> h = m.ns().Unlink(parent, n, caller,
                                              [&m](Handle f) { return m.inodes().IsOpen(f); });
      if (h) {
        CLF_LOG_DEBUG("unlink {:#x} {}: deferred (lease)", parent, n);
        m.inodes().NoteUnlinked(*h);
        return (void)fuse_reply_err(req, 0);
      }
    }
    UnlinkSync(req, parent, n, caller);
  });
}

void RmdirSync(fuse_req_t req, Mount& m, fuse_ino_t parent, const std::string& n,
               const client::Caller& caller);

void Rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  if (!CheckName(req, name)) return;
  Mount& m = MountOf(req);
  std::string n(name);
  m.walks().Forget(parent, n);
  client::Caller caller = CallerOf(req);
  // A directory this mount emptied under leases on it and on its parent:
  // queued behind the unlinks that emptied it.
  m.ns().WithLease(parent, caller, false, [req, &m, parent, n, caller](bool held) {
    if (held && LeasedDirRefuses(m, parent, caller, kMayWrite | kMayExec)) {
      return (void)fuse_reply_err(req, EACCES);
    }
    if (held && m.ns().Rmdir(parent, n, caller)) {
      CLF_LOG_DEBUG("rmdir {:#x} {}: deferred (lease)", parent, n);
      return (void)fuse_reply_err(req, 0);
    }
    RmdirSync(req, m, parent, n, caller);
  });
}

void RmdirSync(fuse_req_t req, Mount& m, fuse_ino_t parent, const std::string& n,
               const client::Caller& caller) {
  // After every queued change (the directory's own deferred unlinks too).
  m.ns().Flush([req, &m, parent, n, caller] {
    CLF_LOG_DEBUG("rmdir {:#x} {}", parent, n);
    m.client().Remove(parent, n, true, false, caller,
                      Completion<RemoveResult>(m, req, [req, &m, parent, n](Result<RemoveResult> r) {
                        if (!r.ok()) return ReplyStatus(req, r.status(), "rmdir");
                        m.ns().NoteRemoved(parent, n);
                        fuse_reply_err(req, 0);
                      }));
  });
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
  std::string sn(name), dn(newname);
  m.walks().Forget(parent, sn);
  m.walks().Forget(newparent, dn);
  client::Caller caller = CallerOf(req);
  // A file moved between leased directories to a free name: answered here,
  // committed later.
  if ((cflags & 2) == 0 && !LeasedDirRefuses(m, parent, caller, kMayWrite | kMayExec) &&
      !LeasedDirRefuses(m, newparent, caller, kMayWrite | kMayExec) &&
      m.ns().Rename(parent, sn, newparent, dn, caller)) {
    CLF_LOG_DEBUG("rename {:#x} {} -> {:#x} {}: deferred (leases)", parent, sn, newparent, dn);
    return (void)fuse_reply_err(req, 0);
  }
  m.ns().Flush([req, &m, parent, sn, newparent, dn, cflags, caller] {
    const bool keep_orphan = m.inodes().AnyOpen();
    CLF_LOG_DEBUG("rename {:#x} {} -> {:#x} {} flags {}", parent, sn, newparent, dn, cflags);
    m.client().Rename(
        parent, sn, newparent, dn, cflags, keep_orphan, caller,
        Completion<RemoveResult>(m, req, [req, &m, parent, sn, newparent, dn, cflags, caller](
                                             Result<RemoveResult> r) {
          if (!r.ok()) return ReplyStatus(req, r.status(), "rename");
          m.ns().NoteRenamed(parent, sn, newparent, dn, (cflags & 2) != 0);
          AfterRemove(m, *r);
          fuse_reply_err(req, 0);
          m.ns().RenewLapsed(parent, caller);
          if (newparent != parent) m.ns().RenewLapsed(newparent, caller);
        }));
  });
}

namespace {

// fs.protected_hardlinks, read once (the kernel applies it only with
// default_permissions: its check asks the permission hook).
bool ProtectedHardlinks() {
  static const bool on = [] {
    FILE* f = std::fopen("/proc/sys/fs/protected_hardlinks", "r");
    if (f == nullptr) return false;
    int v = 0;
    const bool read = std::fscanf(f, "%d", &v) == 1;
    std::fclose(f);
    return read && v != 0;
  }();
  return on;
}

// May `c` link to `a` under fs.protected_hardlinks (as the kernel's
// may_linkat): the owner, root, or someone who may read and write a regular
// file that is neither setuid nor setgid-executable.
bool MayLinkTo(const Mount& m, const client::Caller& c, const Attr& a) {
  if (c.uid == 0 || c.uid == a.uid) return true;
  if (a.type != FileType::kRegular || (a.mode & S_ISUID) != 0 ||
      (a.mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP)) {
    return false;
  }
  return Allowed(m, c, a, kMayRead | kMayWrite);
}

void LinkNow(fuse_req_t req, Mount& m, fuse_ino_t ino, fuse_ino_t newparent, std::string n,
             client::Caller caller);

}  // namespace

void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  if (!CheckName(req, newname)) return;
  Mount& m = MountOf(req);
  std::string n(newname);
  client::Caller caller = CallerOf(req);
  if (m.options().kernel_permissions || caller.uid == 0 || !ProtectedHardlinks()) {
    return LinkNow(req, m, ino, newparent, std::move(n), std::move(caller));
  }
  WithCheckableAttr(req, m, ino, caller, [req, &m, ino, newparent, n, caller](const Attr& a) {
    if (!MayLinkTo(m, caller, a)) return (void)fuse_reply_err(req, EPERM);
    LinkNow(req, m, ino, newparent, n, caller);
  });
}

namespace {

void LinkNow(fuse_req_t req, Mount& m, fuse_ino_t ino, fuse_ino_t newparent, std::string n,
             client::Caller caller) {
  // A file created here, a new name in a leased directory: answered here,
  // committed later (after the file's create).
  if (!LeasedDirRefuses(m, newparent, caller, kMayWrite | kMayExec)) {
    if (std::optional<Attr> a = m.ns().Link(ino, newparent, n, caller)) {
      CLF_LOG_DEBUG("link {:#x} -> {:#x} {}: deferred (lease)", ino, newparent, n);
      return ReplyEntry(req, m, *a, newparent);
    }
  }
  m.ns().Flush([req, &m, ino, newparent, n, caller] {
    CLF_LOG_DEBUG("link {:#x} -> {:#x} {}", ino, newparent, n);
    m.client().Link(ino, newparent, n, caller,
                    Completion<Attr>(m, req, [req, &m, newparent, n](Result<Attr> r) {
                      if (!r.ok()) return ReplyStatus(req, r.status(), "link");
                      m.ns().NoteLinked(newparent, n, *r);
                      ReplyEntry(req, m, *r, newparent);
                    }));
  });
}

}  // namespace

void Readlink(fuse_req_t req, fuse_ino_t ino) {
  Mount& m = MountOf(req);
  CLF_LOG_DEBUG("readlink {:#x}", ino);
  if (std::optional<std::string> t = m.ns().BornTarget(ino)) {
    return (void)fuse_reply_readlink(req, t->c_str());
  }
  // A link created here whose create is still queued (its lease went).
  if (m.ns().After({ino}, [req, ino] { Readlink(req, ino); })) return;
  m.client().Readlink(ino, CallerOf(req),
                      Completion<std::string>(m, req, [req](Result<std::string> r) {
                        if (!r.ok()) return ReplyStatus(req, r.status(), "readlink");
                        fuse_reply_readlink(req, r->c_str());
                      }));
}

}  // namespace clf::fuse::ops
