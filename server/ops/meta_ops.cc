#include "server/ops/meta_ops.h"

#include <time.h>
#include <sys/stat.h>

#include <algorithm>
#include <memory>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <set>
#include <unordered_map>

#include "common/layout.h"
#include "common/log.h"
#include "common/posix_access.h"
#include "server/ops/ops_internal.h"
#include "server/ops/permissions.h"

namespace clf::server {

namespace {
// A file capability: cleared by a write, a truncate and a chown.
constexpr std::string_view kFileCapsXattr = "security.capability";
}  // namespace

MetaOps::MetaOps(const ClusterConfig& cluster, ServerId self, RocksMetaStore* store,
                 ObjectStore* objects, Peers* peers)
    : cluster_(cluster), self_(self), store_(store), objects_(objects), peers_(peers) {}

Status MetaOps::Init() {
  // Server 0 holds the root: its counters start above it.
  handles_.Recover(self_ == 0 ? 1 : 0);
  if (self_ == 0) {
    Result<v1::Attr> root = store_->GetAttr(kRootHandle);
    if (!root.ok()) {
      v1::Attr a;
      a.set_handle(kRootHandle);
      a.set_type(v1::FT_DIRECTORY);
      a.set_mode(0755);
      a.set_nlink(2);
      *a.mutable_atime() = *a.mutable_mtime() = *a.mutable_ctime() = Now();
      RocksMetaStore::Batch b;
      b.PutAttr(a);
      CLF_RETURN_IF_ERROR(store_->Commit(b));
      CLF_LOG_INFO("created the root directory");
    }
  }
  inodes_ = static_cast<int64_t>(store_->AllAttrHandles().size());
  return intents_.Load();
}

uint64_t MetaOps::inode_count() const { return static_cast<uint64_t>(std::max<int64_t>(0, inodes_)); }

Result<Handle> MetaOps::ReserveHandles(uint32_t count) { return handles_.Reserve(count); }

Result<v1::DirLeaseReply> MetaOps::LeaseListing(Handle dir_handle, const v1::Caller& c,
                                                size_t max_entries, bool with_attrs) {
  CLF_ASSIGN_OR_RETURN(v1::Attr dir, GetDir(dir_handle));
  if (dir.nlink() == 0) return NotFound("directory was removed");
  // The listing names every entry: only for a caller who may list them.
  CLF_RETURN_IF_ERROR(CheckAccess(dir, c, kR | kX));
  v1::DirLeaseReply rep;
  std::string after;
  for (;;) {
    bool eof = false;
    CLF_ASSIGN_OR_RETURN(std::vector<ListedEntry> list,
                         store_->ListEntries(dir_handle, after, 4096, &eof));
    for (ListedEntry& le : list) {
      if (static_cast<size_t>(rep.entries_size()) >= max_entries) {
        return Status(Code::kNoSpace, "directory too large for a lease");
      }
      v1::DirEntry* d = rep.add_entries();
      d->set_handle(le.value.handle);
      d->set_type(le.value.type);
      d->set_name(std::move(le.name));
    }
    if (eof || list.empty()) break;
    after = rep.entries(rep.entries_size() - 1).name();
  }
  if (with_attrs && static_cast<size_t>(rep.entries_size()) <= kLeaseAttrsMax) {
    // A server down for some attributes costs the listing nothing: the
    // client then reads them with ReadDir as without a lease.
    Status s = FillEntryAttrs(rep.mutable_entries());
    if (s.ok()) {
      rep.set_with_attrs(true);
    } else {
      for (v1::DirEntry& e : *rep.mutable_entries()) e.clear_attr();
    }
  }
  Layout l = cluster_.default_layout;
  if (dir.has_layout() && dir.layout().stripe_count() > 0) l = FromProto(dir.layout());
  l.first_server = 0;
  *rep.mutable_file_layout() = ToProto(l);
  *rep.mutable_dir() = std::move(dir);
  return rep;
}

// ---------------------------------------------------------------- helpers

Result<v1::Attr> MetaOps::AttrAnywhere(Handle h) {
  if (ServerOf(h) == self_) return store_->GetAttr(h);
  if (ServerOf(h) >= n()) return Status(Code::kStale, "handle names no server of this cluster");
  CLF_ASSIGN_OR_RETURN(std::vector<v1::Attr> v, peers_->GetAttrs(ServerOf(h), {h}));
  if (v.size() != 1 || v[0].handle() == 0) return Status(Code::kStale, "no such file");
  return v[0];
}

Status MetaOps::CheckStickyOf(const v1::Attr& dir, Handle child, const v1::Caller& c) {
  if ((dir.mode() & S_ISVTX) == 0) return Status::Ok();
  CLF_ASSIGN_OR_RETURN(v1::Attr a, AttrAnywhere(child));
  return CheckSticky(dir, a, c);
}

Result<v1::Attr> MetaOps::GetDir(Handle h) {
  if (ServerOf(h) != self_) {
    return Status(Code::kInvalid, "directory " + std::to_string(h) + " is not on this server");
  }
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(h));
  if (!IsDir(a)) return Status(Code::kNotDir, "not a directory");
  return a;
}

Status MetaOps::DestroyLocal(const v1::Attr& a, RocksMetaStore::Batch* b) {
  b->DeleteAttr(a.handle());
  // Point deletes, and only when there are xattrs: a DeleteRange per removed
  // file would leave range tombstones in the memtable that every Get must walk.
  if (a.has_xattrs()) {
    CLF_ASSIGN_OR_RETURN(std::vector<std::string> names, store_->ListXattrs(a.handle()));
    for (const std::string& n : names) b->DeleteXattr(a.handle(), n);
  }
  b->DeleteOrphan(a.handle());
  if (a.type() == v1::FT_SYMLINK) b->DeleteSymlink(a.handle());
  return Status::Ok();
}

Result<v1::AdjustLinkReply> MetaOps::AdjustLinkLocal(Handle h, int delta, bool keep_orphan) {
  std::lock_guard<std::mutex> l(InodeLock(h));
  RocksMetaStore::Batch b;
  CLF_ASSIGN_OR_RETURN(v1::AdjustLinkReply rep, AdjustLinkInBatch(h, delta, keep_orphan, &b));
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  AfterLinkCommit(rep);
  return rep;
}

void MetaOps::AfterLinkCommit(const v1::AdjustLinkReply& rep) {
  if (!rep.destroyed()) return;
  --inodes_;
  if (rep.attr().type() == v1::FT_REGULAR) gc_.QueueSized(rep.attr());
}

Result<v1::AdjustLinkReply> MetaOps::AdjustLinkInBatch(Handle h, int delta, bool keep_orphan,
                                                       RocksMetaStore::Batch* bp) {
  RocksMetaStore::Batch& b = *bp;
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(h));
  v1::AdjustLinkReply rep;
  int64_t nl = static_cast<int64_t>(a.nlink()) + delta;
  if (nl < 0) nl = 0;
  if (delta > 0 && nl > kMaxLinks) return Status(Code::kTooManyLinks, "too many links");
  a.set_nlink(static_cast<uint32_t>(nl));
  *a.mutable_ctime() = Now();
  if (nl == 0) {
    if (keep_orphan && a.type() == v1::FT_REGULAR) {
      b.PutAttr(a);
      b.PutOrphan(h);
      rep.set_orphaned(true);
    } else {
      CLF_RETURN_IF_ERROR(DestroyLocal(a, &b));
      // The data objects go with the metadata, in the same batch: a crash cannot
      // lose track of them. The background removal collective frees them.
      if (a.type() == v1::FT_REGULAR) b.PutGarbage(h, a.layout());
      rep.set_destroyed(true);
    }
  } else {
    b.PutAttr(a);
  }
  *rep.mutable_attr() = a;
  return rep;
}

Result<v1::AdjustLinkReply> MetaOps::AdjustLinkAnywhere(Handle h, int delta, bool keep_orphan) {
  if (ServerOf(h) == self_) return AdjustLinkLocal(h, delta, keep_orphan);
  v1::AdjustLinkRequest r;
  r.set_handle(h);
  r.set_delta(delta);
  r.set_keep_orphan(keep_orphan);
  return peers_->AdjustLink(ServerOf(h), r);
}

Status MetaOps::RemoveDirLocal(Handle h) {
  std::lock_guard<std::recursive_mutex> l(DirLock(h));
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(h));
  if (!IsDir(a)) return Status(Code::kNotDir, "not a directory");
  CLF_ASSIGN_OR_RETURN(bool has, store_->HasEntries(h));
  if (has) return Status(Code::kNotEmpty, "directory not empty");
  RocksMetaStore::Batch b;
  CLF_RETURN_IF_ERROR(DestroyLocal(a, &b));
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  --inodes_;
  return Status::Ok();
}

// ---------------------------------------------------------------- namespace

Result<EntryValue> MetaOps::FindEntry(const v1::LookupRequest& r) {
  CLF_RETURN_IF_ERROR(ValidateName(r.name()));
  CLF_ASSIGN_OR_RETURN(v1::Attr dir, GetDir(r.parent()));
  CLF_RETURN_IF_ERROR(CheckAccess(dir, r.caller(), kX));
  return store_->GetEntry(r.parent(), r.name());
}

Result<v1::Attr> MetaOps::Lookup(const v1::LookupRequest& r) {
  CLF_ASSIGN_OR_RETURN(EntryValue e, FindEntry(r));
  CLF_ASSIGN_OR_RETURN(v1::Attr a, AttrAnywhere(e.handle));
  CLF_RETURN_IF_ERROR(coll_.FillSizes({&a}));
  return a;
}

Result<bool> MetaOps::LookupLocal(const v1::LookupRequest& r, v1::Attr* out) {
  CLF_ASSIGN_OR_RETURN(EntryValue e, FindEntry(r));
  if (ServerOf(e.handle) != self_) return false;
  CLF_ASSIGN_OR_RETURN(*out, store_->GetAttr(e.handle));
  return true;
}

Result<v1::Attr> MetaOps::GetAttrLocal(Handle h) {
  if (ServerOf(h) != self_) return Status(Code::kStale, "handle is not owned by this server");
  return store_->GetAttr(h);
}

Result<v1::Attr> MetaOps::GetAttr(Handle h, const v1::Caller& c) {
  if (ServerOf(h) != self_) return Status(Code::kStale, "handle is not owned by this server");
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(h));
  CLF_RETURN_IF_ERROR(coll_.FillSizes({&a}));
  return a;
}

namespace {

// chown's rules (the kernel's chown_ok and chgrp_ok): root may do anything;
// the owner may "change" the owner to itself and the group to any group it
// is in (or to the current one); nobody else may name either.
Status ChownAllowed(const v1::Attr& a, const v1::SetAttrRequest& r, const v1::Caller& c) {
  if (c.uid() == 0) return Status::Ok();
  const bool owner = c.uid() == a.uid();
  if ((r.valid() & v1::SETATTR_UID) && !(owner && r.uid() == a.uid())) {
    return Status(Code::kNotPermitted, "only root may change the owner");
  }
  if ((r.valid() & v1::SETATTR_GID) && !(owner && (r.gid() == a.gid() || InGroup(c, r.gid())))) {
    return Status(Code::kNotPermitted, "not permitted to change the group");
  }
  return Status::Ok();
}

// The mode a write, truncate or chown of `c` leaves (common/posix_access.h).
uint32_t KillPrivMode(const v1::Attr& a, const v1::Caller& c) {
  return ModeAfterKillPriv(a.mode(), c.uid() == 0, InGroup(c, a.gid()));
}

}  // namespace

// SetAttr's steps. Each checks its part of the request before anything is
// changed (the truncate collective is not undone), then changes `a`.
struct SetAttrAsk {
  const v1::SetAttrRequest& r;
  const v1::Caller& c;
  uint32_t v;          // valid bits, the truncate's mtime turned into MTIME_NOW
  bool owner;          // the caller owns the file, or is root
  bool via_open_file;  // through a descriptor open for writing (ftruncate): write was checked at open
};

namespace {

constexpr uint32_t kTimeBits =
    v1::SETATTR_ATIME | v1::SETATTR_MTIME | v1::SETATTR_ATIME_NOW | v1::SETATTR_MTIME_NOW;

Status CheckTimesAllowed(const v1::Attr& a, const SetAttrAsk& q) {
  if (!(q.v & kTimeBits) || q.owner) return Status::Ok();
  // Explicit times need ownership; "now" needs ownership or write access.
  if ((q.v & (v1::SETATTR_ATIME | v1::SETATTR_MTIME)) != 0) {
    return Status(Code::kNotPermitted, "only the owner may set times");
  }
  if (!q.via_open_file) CLF_RETURN_IF_ERROR(CheckAccess(a, q.c, kW));
  return Status::Ok();
}

Status ApplyMode(v1::Attr* a, const SetAttrAsk& q) {
  if (!(q.v & v1::SETATTR_MODE)) return Status::Ok();
  if (!q.owner) {
    // The kernel clears setuid/setgid after a write, truncate or chown by
    // anyone (kill-priv) and sends that as a mode change: a non-owner who
    // may write the file may drop those two bits, nothing else.
    const uint32_t want = q.r.mode() & 07777, have = a->mode() & 07777;
    const uint32_t dropped = have & ~want;
    const bool kill_priv =
        (want & ~have) == 0 && dropped != 0 && (dropped & ~uint32_t(S_ISUID | S_ISGID)) == 0;
    if (!kill_priv) return Status(Code::kNotPermitted, "only the owner may change the mode");
    if (!q.via_open_file && !CheckAccess(*a, q.c, kW).ok()) {
      return Status(Code::kNotPermitted, "only the owner or a writer may clear setuid/setgid");
    }
  }
  uint32_t mode = q.r.mode() & 07777;
  if (q.c.uid() != 0 && !InGroup(q.c, a->gid())) mode &= ~uint32_t(S_ISGID);
  a->set_mode(mode);
  return Status::Ok();
}

// Returns whether the chown clears a file capability (every chown of a
// non-directory does).
Result<bool> ApplyChown(v1::Attr* a, const SetAttrAsk& q) {
  if (!(q.v & (v1::SETATTR_UID | v1::SETATTR_GID | v1::SETATTR_CHOWN_NOTHING))) return false;
  CLF_RETURN_IF_ERROR(ChownAllowed(*a, q.r, q.c));
  bool kills_caps = false;
  // Every chown of a non-directory, even to the same owner and even by
  // root, clears setuid, setgid as a write would, and a file capability
  // (the kernel's chown_common: ATTR_KILL_SUID, setattr_should_drop_sgid,
  // ATTR_KILL_PRIV). Clearing a bit changes the mode, which only the
  // owner or root may do: chown(f, -1, -1) of another's setuid file is
  // EPERM, as on Linux.
  if (a->type() != v1::FT_DIRECTORY) {
    const uint32_t mode = KillPrivMode(*a, q.c);
    if (mode != a->mode() && q.c.uid() != 0 && q.c.uid() != a->uid()) {
      return Status(Code::kNotPermitted, "only the owner may clear setuid/setgid");
    }
    a->set_mode(mode);
    kills_caps = true;
  }
  if (q.v & v1::SETATTR_UID) a->set_uid(q.r.uid());
  if (q.v & v1::SETATTR_GID) a->set_gid(q.r.gid());
  return kills_caps;
}

void ApplyTimes(v1::Attr* a, const SetAttrAsk& q) {
  if (q.v & v1::SETATTR_ATIME) *a->mutable_atime() = q.r.atime();
  if (q.v & v1::SETATTR_MTIME) *a->mutable_mtime() = q.r.mtime();
  if (q.v & v1::SETATTR_ATIME_NOW) *a->mutable_atime() = Now();
  if (q.v & v1::SETATTR_MTIME_NOW) *a->mutable_mtime() = Now();
}

// A directory's default layout.
Status ApplyDirLayout(v1::Attr* a, const SetAttrAsk& q, const ClusterConfig& cluster) {
  if (!(q.v & v1::SETATTR_LAYOUT)) return Status::Ok();
  if (!IsDir(*a)) return Invalid("a layout can only be set on a directory");
  if (!q.owner) return Status(Code::kNotPermitted, "only the owner may set the layout");
  Layout nl = FromProto(q.r.layout());
  if (nl.stripe_count == 0) nl.stripe_count = cluster.size();  // "all servers", as in the cluster file
  // Each file's first server is chosen by hash at create: a directory's is 0.
  if (nl.first_server != 0) return Invalid("a directory layout's first_server must be 0");
  CLF_RETURN_IF_ERROR(ValidateLayout(nl, cluster.size()));
  if (nl.replicas > 1 && cluster.metadata_mode == MetadataMode::kClient) {
    return Status(Code::kNotSupported,
                  "replicated files need metadata_mode onehop or collective (client mode "
                  "creates and removes one object per server)");
  }
  *a->mutable_layout() = ToProto(nl);
  return Status::Ok();
}

}  // namespace

Result<bool> MetaOps::ApplyKillPriv(v1::Attr* a, const SetAttrAsk& q, bool kill_asked,
                                    RocksMetaStore::Batch* b) {
  if (kill_asked && !q.owner && !q.via_open_file) CLF_RETURN_IF_ERROR(CheckAccess(*a, q.c, kW));
  bool killed = false;
  if ((q.v & v1::SETATTR_KILL_SUIDGID) && !IsDir(*a)) {
    const uint32_t mode = KillPrivMode(*a, q.c);
    killed = mode != a->mode();
    a->set_mode(mode);
  }
  const Handle h = a->handle();
  if ((q.v & v1::SETATTR_KILL_CAPS) && a->has_xattrs() &&
      store_->GetXattr(h, kFileCapsXattr).ok()) {
    CLF_ASSIGN_OR_RETURN(std::vector<std::string> names, store_->ListXattrs(h));
    b->DeleteXattr(h, kFileCapsXattr);
    if (names.size() <= 1) a->set_has_xattrs(false);
    killed = true;
  }
  return killed;
}

Status MetaOps::TruncateTo(v1::Attr* a, const SetAttrAsk& q, bool* replicas_changed) {
  if (IsDir(*a)) return Status(Code::kIsDir, "is a directory");
  if (a->type() != v1::FT_REGULAR) return Invalid("truncate of a non-regular file");
  const uint64_t size = q.r.size();
  if (size > kMaxFileSize) return Status(Code::kFileTooBig, "size past the maximum file size");
  if (!q.via_open_file) CLF_RETURN_IF_ERROR(CheckAccess(*a, q.c, kW));
  v1::CollFile f;
  f.set_handle(a->handle());
  *f.mutable_layout() = a->layout();
  f.set_size(size);
  CLF_RETURN_IF_ERROR(TruncateObjects(f, a, replicas_changed));
  // A shrink keeps the emptied objects: a sized removal must still reach them.
  if (size < a->size()) a->set_size_high(std::max(a->size_high(), a->size()));
  a->set_size(size);
  // The allocation after the cut (one stat collective); the size is now exact.
  CLF_RETURN_IF_ERROR(coll_.GatherSizes({a}));
  a->set_size(size);
  *a->mutable_mtime() = Now();
  return Status::Ok();
}

Result<v1::Attr> MetaOps::SetAttr(const v1::SetAttrRequest& r, bool exact_sizes) {
  const Handle h = r.handle();
  if (ServerOf(h) != self_) return Status(Code::kStale, "handle is not owned by this server");
  const v1::Caller& c = r.caller();
  std::lock_guard<std::mutex> l(InodeLock(h));
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(h));
  uint32_t v = r.valid();
  // A truncate's mtime arrives as an explicit time (the kernel's clock): it is
  // the truncate's own "now", not a utimensat.
  if ((v & v1::SETATTR_SIZE) && (v & v1::SETATTR_MTIME) && !(v & v1::SETATTR_ATIME)) {
    v = (v & ~uint32_t(v1::SETATTR_MTIME)) | v1::SETATTR_MTIME_NOW;
  }
  SetAttrAsk q{r, c, v, c.uid() == 0 || c.uid() == a.uid(),
               (v & v1::SETATTR_VIA_OPEN_FILE) != 0};
  // Every permission check before any change (the truncate collective is not undone).
  CLF_RETURN_IF_ERROR(CheckTimesAllowed(a, q));
  CLF_RETURN_IF_ERROR(ApplyMode(&a, q));
  // What the caller asked to clear (a write's or truncate's kill-priv), as
  // against what a chown clears by itself.
  const bool kill_asked = (v & (v1::SETATTR_KILL_SUIDGID | v1::SETATTR_KILL_CAPS)) != 0;
  CLF_ASSIGN_OR_RETURN(bool chown_kills_caps, ApplyChown(&a, q));
  // KILL_SUIDGID, KILL_CAPS: what a write or truncate must clear, asked for by the
  // client that makes it (FUSE_HANDLE_KILLPRIV_V2: the kernel leaves this to
  // the file system). KILL_SUIDGID: setuid, and setgid when group-executable or the
  // caller is not in the group (a caller without CAP_FSETID); KILL_CAPS: the
  // file capability. Only bits go, so whoever may write the file may ask.
  RocksMetaStore::Batch b;
  if (chown_kills_caps) q.v |= v1::SETATTR_KILL_CAPS;
  if (q.v & (v1::SETATTR_KILL_SUIDGID | v1::SETATTR_KILL_CAPS)) {
    CLF_ASSIGN_OR_RETURN(bool killed, ApplyKillPriv(&a, q, kill_asked, &b));
    // Nothing else asked and nothing to clear: no change, no ctime.
    if (!killed && (q.v & ~uint32_t(v1::SETATTR_VIA_OPEN_FILE | v1::SETATTR_KILL_SUIDGID |
                                    v1::SETATTR_KILL_CAPS)) == 0) {
      if (exact_sizes) CLF_RETURN_IF_ERROR(coll_.FillSizes({&a}));
      return a;
    }
  }
  bool replicas_changed = false;  // the truncate marked copies stale
  if (v & v1::SETATTR_SIZE) CLF_RETURN_IF_ERROR(TruncateTo(&a, q, &replicas_changed));
  ApplyTimes(&a, q);
  CLF_RETURN_IF_ERROR(ApplyDirLayout(&a, q, cluster_));
  *a.mutable_ctime() = Now();
  b.PutAttr(a);
  if (replicas_changed) b.PutDegraded(a.handle());
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  if (replicas_changed) {
    CLF_RETURN_IF_ERROR(store_->SyncWal());
    if (on_replicas_changed_) on_replicas_changed_(a.handle(), a.layout());
  }
  // A truncate gathered the sizes above already; otherwise open writers need them.
  if (!(v & v1::SETATTR_SIZE) && exact_sizes) CLF_RETURN_IF_ERROR(coll_.FillSizes({&a}));
  return a;
}

namespace {

Status ValidateCreate(const v1::CreateRequest& r) {
  CLF_RETURN_IF_ERROR(ValidateName(r.name()));
  if (r.type() == v1::FT_UNKNOWN || r.type() > v1::FT_BLOCK) return Invalid("bad file type");
  if (r.type() == v1::FT_SYMLINK &&
      (r.symlink_target().empty() || r.symlink_target().size() > kMaxSymlinkBytes ||
       r.symlink_target().find('\0') != std::string::npos)) {
    return Invalid("symlink target must be 1..4095 bytes without NUL");
  }
  return Status::Ok();
}

// A new entry's attributes before its handle: owner, group and mode as
// POSIX gives them in `dir` (setgid directories), every time `when`.
v1::Attr NewAttr(const v1::CreateRequest& r, const v1::Attr& dir, const v1::Timespec& when) {
  const v1::Caller& c = r.caller();
  v1::Attr a;
  a.set_type(r.type());
  uint32_t mode = r.mode() & 07777;
  a.set_uid(c.uid());
  a.set_gid((dir.mode() & S_ISGID) ? dir.gid() : c.gid());
  if (r.type() == v1::FT_DIRECTORY && (dir.mode() & S_ISGID)) mode |= S_ISGID;
  a.set_mode(mode);
  a.set_rdev(r.rdev());
  *a.mutable_atime() = *a.mutable_mtime() = *a.mutable_ctime() = when;
  return a;
}

}  // namespace

Result<v1::Attr> MetaOps::Create(const v1::CreateRequest& r, v1::Attr* parent_out, bool* existed) {
  CLF_RETURN_IF_ERROR(ValidateCreate(r));
  const v1::Caller& c = r.caller();
  std::lock_guard<std::recursive_mutex> dl(DirLock(r.parent()));
  CLF_ASSIGN_OR_RETURN(v1::Attr dir, GetDir(r.parent()));
  if (dir.nlink() == 0) return NotFound("directory was removed");
  Result<EntryValue> existing = store_->GetEntry(r.parent(), r.name());
  if (existing.ok()) {
    if (r.exclusive() || r.type() != v1::FT_REGULAR) return Exists("file exists");
    CLF_RETURN_IF_ERROR(CheckAccess(dir, c, kX));
    CLF_ASSIGN_OR_RETURN(v1::Attr a, AttrAnywhere(existing->handle));
    CLF_RETURN_IF_ERROR(coll_.FillSizes({&a}));
    // Not created: a writer opening it reports its open to M (ReportWrite +1).
    if (existed) *existed = true;
    return a;
  }
  if (existing.status().code() != Code::kNotFound) return existing.status();
  CLF_RETURN_IF_ERROR(CheckAccess(dir, c, kW | kX));

  // One time for the file and its directory's change: the time the client
  // acknowledged a create under its lease (the directory's times it showed),
  // else now. The mount gives a held directory the new file's ctime.
  const v1::Timespec when = r.has_time() ? r.time() : Now();
  v1::Attr a = NewAttr(r, dir, when);
  RocksMetaStore::Batch b;
  if (r.type() == v1::FT_DIRECTORY) {
    CLF_RETURN_IF_ERROR(MakeDirectory(r, &a, &b));
    dir.set_nlink(dir.nlink() + 1);
  } else {
    CLF_RETURN_IF_ERROR(MakeNonDirectory(r, dir, &a, &b));
  }
  *dir.mutable_mtime() = *dir.mutable_ctime() = when;
  b.PutAttr(dir);
  b.PutEntry(r.parent(), r.name(), EntryValue{a.handle(), a.type()});
  Status s = store_->Commit(b);
  if (!s.ok()) {
    if (r.type() == v1::FT_DIRECTORY && ServerOf(a.handle()) != self_) {
      peers_->RemoveDir(ServerOf(a.handle()), a.handle()).IgnoreError();
    } else if (r.type() == v1::FT_REGULAR) {
      gc_.Drop(a.handle(), a.layout()).IgnoreError();
    }
    return s;
  }
  if (ServerOf(a.handle()) == self_) ++inodes_;
  if (parent_out) *parent_out = dir;
  return a;
}

Status MetaOps::MakeDirectory(const v1::CreateRequest& r, v1::Attr* a, RocksMetaStore::Batch* b) {
  a->set_nlink(2);
  // New directories are placed by hash over the servers.
  ServerId s = static_cast<ServerId>(Mix(r.parent() * 31 + std::hash<std::string>()(r.name())) % n());
  if (s == self_) {
    CLF_ASSIGN_OR_RETURN(Handle h, handles_.New());
    a->set_handle(h);
    b->PutAttr(*a);
    return Status::Ok();
  }
  v1::MakeDirRequest mr;
  mr.set_parent(r.parent());
  *mr.mutable_attr() = *a;
  CLF_ASSIGN_OR_RETURN(*a, peers_->MakeDir(s, mr));
  return Status::Ok();
}

Status MetaOps::MakeNonDirectory(const v1::CreateRequest& r, const v1::Attr& dir, v1::Attr* a,
                                 RocksMetaStore::Batch* b) {
  if (r.handle() != 0) {
    // Created under a directory lease: the handle is one this server reserved
    // (ReserveHandles) and must not name an existing object.
    if ((r.type() != v1::FT_REGULAR && r.type() != v1::FT_SYMLINK) ||
        ServerOf(r.handle()) != self_ || !handles_.HandedOut(r.handle())) {
      return Invalid("preassigned handle not reserved here");
    }
    if (store_->GetAttr(r.handle()).ok()) return Exists("preassigned handle in use");
    a->set_handle(r.handle());
  } else {
    CLF_ASSIGN_OR_RETURN(Handle h, handles_.New());  // M = P: the metadata object lives with the entry
    a->set_handle(h);
  }
  a->set_nlink(1);
  if (r.type() == v1::FT_REGULAR) {
    a->set_writers(r.open_for_write() ? 1 : 0);
    Layout l = cluster_.default_layout;
    if (dir.has_layout() && dir.layout().stripe_count() > 0) l = FromProto(dir.layout());
    l.first_server = FirstServerFor(a->handle(), n());
    *a->mutable_layout() = ToProto(l);
    // One hop (default): no data server is involved; each creates its object on
    // the first write it receives. Paper 004's per-file mode creates them now.
    if (cluster_.metadata_mode == MetadataMode::kCollective) {
      v1::CollFile f;
      f.set_handle(a->handle());
      *f.mutable_layout() = a->layout();
      CLF_RETURN_IF_ERROR(CreateObjectsCollective(f));
    }
  }
  if (r.type() == v1::FT_SYMLINK) {
    a->set_mode(0777);
    a->set_size(r.symlink_target().size());
    b->PutSymlink(a->handle(), r.symlink_target());
  }
  b->PutAttr(*a);
  return Status::Ok();
}

Status MetaOps::SyncWal() { return store_->SyncWal(); }

Result<v1::Attr> MetaOps::PeerMakeDir(const v1::MakeDirRequest& r) {
  v1::Attr a = r.attr();
  CLF_ASSIGN_OR_RETURN(Handle h, handles_.New());
  a.set_handle(h);
  a.set_type(v1::FT_DIRECTORY);
  a.set_nlink(2);
  RocksMetaStore::Batch b;
  b.PutAttr(a);
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  ++inodes_;
  return a;
}

Status MetaOps::PeerRemoveDir(Handle h) { return RemoveDirLocal(h); }

Status MetaOps::RemoveDirAnywhere(Handle h) {
  if (ServerOf(h) == self_) return RemoveDirLocal(h);
  return peers_->RemoveDir(ServerOf(h), h);
}

Result<v1::AdjustLinkReply> MetaOps::PeerAdjustLink(const v1::AdjustLinkRequest& r) {
  if (ServerOf(r.handle()) != self_) return Status(Code::kStale, "handle not owned here");
  if (r.op_id() != 0) return AdjustLinkOnce(r);
  return AdjustLinkLocal(r.handle(), r.delta(), r.keep_orphan());
}

Result<std::vector<v1::Attr>> MetaOps::PeerGetAttrs(const std::vector<Handle>& hs) {
  std::vector<v1::Attr> out;
  out.reserve(hs.size());
  for (Handle h : hs) {
    Result<v1::Attr> a = store_->GetAttr(h);
    out.push_back(a.ok() ? *a : v1::Attr());
  }
  return out;
}

Result<v1::Attr> MetaOps::Link(const v1::LinkRequest& r, v1::Attr* parent_out) {
  CLF_RETURN_IF_ERROR(ValidateName(r.new_name()));
  std::lock_guard<std::recursive_mutex> dl(DirLock(r.new_parent()));
  CLF_ASSIGN_OR_RETURN(v1::Attr dir, GetDir(r.new_parent()));
  CLF_RETURN_IF_ERROR(CheckAccess(dir, r.caller(), kW | kX));
  if (store_->GetEntry(r.new_parent(), r.new_name()).ok()) return Exists("file exists");
  CLF_ASSIGN_OR_RETURN(v1::Attr target, AttrAnywhere(r.handle()));
  if (IsDir(target)) return Status(Code::kNotPermitted, "hard link to a directory");
  CLF_ASSIGN_OR_RETURN(v1::AdjustLinkReply adj, AdjustLinkAnywhere(r.handle(), +1, false));
  RocksMetaStore::Batch b;
  b.PutEntry(r.new_parent(), r.new_name(), EntryValue{r.handle(), target.type()});
  *dir.mutable_mtime() = *dir.mutable_ctime() = Now();
  b.PutAttr(dir);
  Status s = store_->Commit(b);
  if (!s.ok()) {
    AdjustLinkAnywhere(r.handle(), -1, false).status().IgnoreError();
    return s;
  }
  v1::Attr a = adj.attr();
  CLF_RETURN_IF_ERROR(coll_.FillSizes({&a}));
  if (parent_out) *parent_out = dir;
  return a;
}

Result<v1::RemoveReply> MetaOps::Remove(const v1::RemoveRequest& r) {
  CLF_RETURN_IF_ERROR(ValidateName(r.name()));
  std::unique_lock<std::recursive_mutex> dl(DirLock(r.parent()));
  CLF_RETURN_IF_ERROR(SettlePendingFor({{r.parent(), r.name()}}, {&dl}));  // rename_intent.cc
  CLF_ASSIGN_OR_RETURN(v1::Attr dir, GetDir(r.parent()));
  CLF_RETURN_IF_ERROR(CheckAccess(dir, r.caller(), kW | kX));
  CLF_ASSIGN_OR_RETURN(EntryValue e, store_->GetEntry(r.parent(), r.name()));
  const bool is_dir = e.type == v1::FT_DIRECTORY;
  if (r.directory() && !is_dir) return Status(Code::kNotDir, "not a directory");
  if (!r.directory() && is_dir) return Status(Code::kIsDir, "is a directory");
  CLF_RETURN_IF_ERROR(CheckStickyOf(dir, e.handle, r.caller()));
  v1::RemoveReply rep;
  rep.set_handle(e.handle);
  RocksMetaStore::Batch b;
  if (is_dir) {
    CLF_RETURN_IF_ERROR(RemoveDirAnywhere(e.handle));
    dir.set_nlink(dir.nlink() > 2 ? dir.nlink() - 1 : 2);
  }
  b.DeleteEntry(r.parent(), r.name());
  *dir.mutable_mtime() = *dir.mutable_ctime() = Now();
  b.PutAttr(dir);
  if (!is_dir && ServerOf(e.handle) == self_) {
    // The file's metadata lives here (the usual case, M = P): the entry, the
    // link count and, at nlink 0, the metadata and its garbage record go in one
    // WriteBatch, so the remove is one commit and crash-atomic.
    std::lock_guard<std::mutex> il(InodeLock(e.handle));
    CLF_ASSIGN_OR_RETURN(v1::AdjustLinkReply adj,
                         AdjustLinkInBatch(e.handle, -1, r.keep_orphan(), &b));
    CLF_RETURN_IF_ERROR(store_->Commit(b));
    AfterLinkCommit(adj);
    if (cluster_.metadata_mode == MetadataMode::kCollective) RemoveObjectsCollective(adj);
    rep.set_orphaned(adj.orphaned());
    *rep.mutable_parent() = dir;
    return rep;
  }
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  dl.unlock();
  *rep.mutable_parent() = dir;
  if (!is_dir) {
    // The entry is gone (acknowledged in the WAL); now the link count, and with
    // it maybe the metadata object and the data objects.
    Result<v1::AdjustLinkReply> adj = AdjustLinkAnywhere(e.handle, -1, r.keep_orphan());
    if (!adj.ok()) {
      CLF_LOG_WARN("unlink {}: entry removed but link count of {:x} not updated: {}", r.name(),
                   e.handle, adj.status().ToString());
    } else {
      rep.set_orphaned(adj->orphaned());
    }
  }
  return rep;
}

namespace {

Status ValidateRename(const v1::RenameRequest& r) {
  CLF_RETURN_IF_ERROR(ValidateName(r.src_name()));
  CLF_RETURN_IF_ERROR(ValidateName(r.dst_name()));
  constexpr uint32_t kRenameBits = v1::RENAME_FLAG_NOREPLACE | v1::RENAME_FLAG_EXCHANGE;
  if (r.flags() & ~kRenameBits) return Invalid("unknown rename flags");
  if ((r.flags() & kRenameBits) == kRenameBits) {
    return Invalid("RENAME_NOREPLACE with RENAME_EXCHANGE");
  }
  return Status::Ok();
}

// RENAME_EXCHANGE of `e` (the source) and `old` (the target) within this
// server: both entries swapped in `b`, the directories' link counts moved
// with a directory that changes parent.
void ExchangeEntries(const v1::RenameRequest& r, const EntryValue& e, const EntryValue& old,
                     bool one_dir, v1::Attr* sdir, v1::Attr* ddir, RocksMetaStore::Batch* b) {
  b->PutEntry(r.src_parent(), r.src_name(), old);
  b->PutEntry(r.dst_parent(), r.dst_name(), e);
  const bool moving_dir = e.type == v1::FT_DIRECTORY;
  const bool old_dir = old.type == v1::FT_DIRECTORY;
  if (one_dir || moving_dir == old_dir) return;
  if (moving_dir) {
    sdir->set_nlink(sdir->nlink() - 1);
    ddir->set_nlink(ddir->nlink() + 1);
  } else {
    sdir->set_nlink(sdir->nlink() + 1);
    ddir->set_nlink(ddir->nlink() - 1);
  }
}

// Both directories changed now (one record when they are one directory:
// within one directory only ddir's copy was changed, a replaced
// directory's link, so it is the one to write).
void StampRenamedDirs(bool one_dir, v1::Attr* sdir, v1::Attr* ddir, RocksMetaStore::Batch* b) {
  const v1::Timespec now = Now();
  *ddir->mutable_mtime() = *ddir->mutable_ctime() = now;
  b->PutAttr(*ddir);
  if (one_dir) return;
  *sdir->mutable_mtime() = *sdir->mutable_ctime() = now;
  b->PutAttr(*sdir);
}

}  // namespace

Result<v1::RenameReply> MetaOps::Rename(const v1::RenameRequest& r, uint64_t session) {
  CLF_RETURN_IF_ERROR(ValidateRename(r));
  if (ServerOf(r.dst_parent()) >= n())
    return Status(Code::kStale, "destination names no server of this cluster");
  if (ServerOf(r.dst_parent()) != self_) return RenameAcrossServers(r, session);
  // Both directories here: one WriteBatch, both locked (std::scoped_lock orders them).
  std::unique_lock<std::recursive_mutex> l1(DirLock(r.src_parent()), std::defer_lock);
  std::unique_lock<std::recursive_mutex> l2(DirLock(r.dst_parent()), std::defer_lock);
  std::lock(l1, l2);
  // A name still the source of an unsettled cross-server rename keeps its entry until settled.
  CLF_RETURN_IF_ERROR(SettlePendingFor(
      {{r.src_parent(), r.src_name()}, {r.dst_parent(), r.dst_name()}}, {&l1, &l2}));
  CLF_ASSIGN_OR_RETURN(v1::Attr sdir, GetDir(r.src_parent()));
  CLF_ASSIGN_OR_RETURN(v1::Attr ddir, GetDir(r.dst_parent()));
  const bool one_dir = r.src_parent() == r.dst_parent();
  CLF_RETURN_IF_ERROR(CheckAccess(sdir, r.caller(), kW | kX));
  CLF_RETURN_IF_ERROR(CheckAccess(ddir, r.caller(), kW | kX));
  CLF_ASSIGN_OR_RETURN(EntryValue e, store_->GetEntry(r.src_parent(), r.src_name()));
  CLF_RETURN_IF_ERROR(CheckStickyOf(sdir, e.handle, r.caller()));
  if (e.type == v1::FT_DIRECTORY && e.handle == r.dst_parent()) {
    return Invalid("cannot move a directory into itself");
  }
  Result<EntryValue> old = store_->GetEntry(r.dst_parent(), r.dst_name());
  if (!old.ok() && old.status().code() != Code::kNotFound) return old.status();
  v1::RenameReply rep;
  RocksMetaStore::Batch b;
  bool replaced_file = false;
  if (r.flags() & v1::RENAME_FLAG_EXCHANGE) {
    if (!old.ok()) return NotFound("exchange target does not exist");
    ExchangeEntries(r, e, *old, one_dir, &sdir, &ddir, &b);
  } else {
    const std::optional<EntryValue> target = old.ok() ? std::optional(*old) : std::nullopt;
    // Onto a hard link of itself: nothing changes.
    if (target && target->handle == e.handle && !(r.flags() & v1::RENAME_FLAG_NOREPLACE)) {
      return rep;
    }
    CLF_ASSIGN_OR_RETURN(replaced_file, MoveEntryHere(r, e, target, one_dir, &sdir, &ddir, &b));
    if (target) rep.set_replaced_handle(target->handle);
  }
  StampRenamedDirs(one_dir, &sdir, &ddir, &b);
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  l1.unlock();
  l2.unlock();
  if (replaced_file) {
    Result<v1::AdjustLinkReply> adj = AdjustLinkAnywhere(rep.replaced_handle(), -1, r.keep_orphan());
    if (adj.ok()) rep.set_orphaned(adj->orphaned());
  }
  return rep;
}

Result<bool> MetaOps::ReplaceTarget(bool moving_dir, const EntryValue& old,
                                    const v1::Attr& dir, const v1::Caller& c) {
  const bool old_dir = old.type == v1::FT_DIRECTORY;
  if (moving_dir && !old_dir) return Status(Code::kNotDir, "target is not a directory");
  if (!moving_dir && old_dir) return Status(Code::kIsDir, "target is a directory");
  CLF_RETURN_IF_ERROR(CheckStickyOf(dir, old.handle, c));
  if (old_dir) CLF_RETURN_IF_ERROR(RemoveDirAnywhere(old.handle));
  return old_dir;
}

Result<bool> MetaOps::MoveEntryHere(const v1::RenameRequest& r, const EntryValue& e,
                                    const std::optional<EntryValue>& old, bool one_dir,
                                    v1::Attr* sdir, v1::Attr* ddir, RocksMetaStore::Batch* b) {
  const bool moving_dir = e.type == v1::FT_DIRECTORY;
  bool replaced_file = false;
  if (old) {
    if (r.flags() & v1::RENAME_FLAG_NOREPLACE) return Exists("target exists");
    CLF_ASSIGN_OR_RETURN(const bool old_dir, ReplaceTarget(moving_dir, *old, *ddir, r.caller()));
    if (old_dir) {
      ddir->set_nlink(ddir->nlink() - 1);  // the replaced directory's link
    } else {
      replaced_file = true;
    }
  }
  b->DeleteEntry(r.src_parent(), r.src_name());
  b->PutEntry(r.dst_parent(), r.dst_name(), e);
  if (moving_dir && !one_dir) {  // within one directory: net zero
    sdir->set_nlink(sdir->nlink() - 1);
    ddir->set_nlink(ddir->nlink() + 1);
  }
  return replaced_file;
}

Result<v1::ReadDirReply> MetaOps::ReadDir(const v1::ReadDirRequest& r) {
  CLF_ASSIGN_OR_RETURN(v1::Attr dir, GetDir(r.handle()));
  CLF_RETURN_IF_ERROR(CheckAccess(dir, r.caller(), kR));
  if (r.after().size() > kMaxNameBytes) return Status(Code::kNameTooLong, "resume name too long");
  size_t max = r.max_entries() == 0 ? 1024 : std::min<uint32_t>(r.max_entries(), 4096);
  bool eof = false;
  CLF_ASSIGN_OR_RETURN(std::vector<ListedEntry> list, store_->ListEntries(r.handle(), r.after(), max, &eof));
  v1::ReadDirReply rep;
  rep.set_eof(eof);
  *rep.mutable_dir() = dir;
  for (ListedEntry& le : list) {
    v1::DirEntry* d = rep.add_entries();
    d->set_name(std::move(le.name));
    d->set_handle(le.value.handle);
    d->set_type(le.value.type);
  }
  if (r.plus()) CLF_RETURN_IF_ERROR(FillEntryAttrs(rep.mutable_entries()));
  return rep;
}

Status MetaOps::FillEntryAttrs(google::protobuf::RepeatedPtrField<v1::DirEntry>* entries) {
  // Others' attributes batched per owning server, asked of all of them at
  // once; local ones read from RocksDB meanwhile; then the sizes of files
  // being written by one stat collective.
  std::map<ServerId, std::vector<int>> remote;
  for (int i = 0; i < entries->size(); ++i) {
    if (ServerOf(entries->Get(i).handle()) != self_) {
      remote[ServerOf(entries->Get(i).handle())].push_back(i);
    }
  }
  struct Gather {
    std::mutex mu;
    std::condition_variable cv;
    size_t pending = 0;
    std::map<ServerId, Result<std::vector<v1::Attr>>> got;
  };
  auto g = std::make_shared<Gather>();
  g->pending = remote.size();
  for (auto& [s, idx] : remote) {
    std::vector<Handle> hs;
    for (int i : idx) hs.push_back(entries->Get(i).handle());
    peers_->GetAttrsAsync(s, hs, [g, s = s](Result<std::vector<v1::Attr>> r) {
      std::lock_guard<std::mutex> l(g->mu);
      g->got.emplace(s, std::move(r));
      if (--g->pending == 0) g->cv.notify_all();
    });
  }
  for (int i = 0; i < entries->size(); ++i) {
    v1::DirEntry* d = entries->Mutable(i);
    if (ServerOf(d->handle()) != self_) continue;
    Result<v1::Attr> a = store_->GetAttr(d->handle());
    if (a.ok()) *d->mutable_attr() = *a;
  }
  {
    // Every call ends by its deadline (rpc_timeout_ms), so this wait does too.
    std::unique_lock<std::mutex> l(g->mu);
    g->cv.wait(l, [&] { return g->pending == 0; });
  }
  for (auto& [s, idx] : remote) {
    Result<std::vector<v1::Attr>>& attrs = g->got.at(s);
    if (!attrs.ok()) return attrs.status();
    for (size_t k = 0; k < idx.size() && k < attrs->size(); ++k) {
      *entries->Mutable(idx[k])->mutable_attr() = (*attrs)[k];
    }
  }
  std::vector<v1::Attr*> ptrs;
  for (int i = 0; i < entries->size(); ++i) ptrs.push_back(entries->Mutable(i)->mutable_attr());
  return coll_.FillSizes(ptrs);
}

Result<std::string> MetaOps::Readlink(Handle h) {
  if (ServerOf(h) != self_) return Status(Code::kStale, "handle not owned here");
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(h));
  if (a.type() != v1::FT_SYMLINK) return Invalid("not a symlink");
  return store_->GetSymlink(h);
}

namespace {
Status CheckXattrName(const std::string& name) {
  if (name.empty()) return Invalid("empty xattr name");
  if (name.size() > kMaxXattrNameBytes) return Status(Code::kRange, "xattr name too long");
  if (name.find('\0') != std::string::npos) return Invalid("xattr name contains NUL");
  if (name.rfind("user.", 0) != 0 && name.rfind("trusted.", 0) != 0 &&
      name.rfind("security.", 0) != 0 && name.rfind("system.", 0) != 0) {
    return Status(Code::kNotSupported, "xattr namespace not supported");
  }
  return Status::Ok();
}
}  // namespace

Result<std::string> MetaOps::GetXattr(const v1::XattrRequest& r) {
  CLF_RETURN_IF_ERROR(CheckXattrName(r.name()));
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(r.handle()));
  if (r.name().rfind("user.", 0) == 0) CLF_RETURN_IF_ERROR(CheckAccess(a, r.caller(), kR));
  if (r.name().rfind("trusted.", 0) == 0 && r.caller().uid() != 0) {
    return Status(Code::kNoData, "no such attribute");
  }
  return store_->GetXattr(r.handle(), r.name());
}

Status MetaOps::SetXattr(const v1::XattrRequest& r) {
  CLF_RETURN_IF_ERROR(CheckXattrName(r.name()));
  constexpr uint32_t kXattrBits = v1::XATTR_FLAG_CREATE | v1::XATTR_FLAG_REPLACE;
  if (r.flags() & ~kXattrBits) return Invalid("unknown xattr flags");
  if (r.flags() == kXattrBits) return Invalid("XATTR_CREATE with XATTR_REPLACE");
  if (r.value().size() > kMaxXattrValueBytes) return Status(Code::kTooBig, "xattr value too large");
  std::lock_guard<std::mutex> l(InodeLock(r.handle()));
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(r.handle()));
  if (r.name().rfind("user.", 0) == 0) {
    if (a.type() != v1::FT_REGULAR && a.type() != v1::FT_DIRECTORY) {
      return Status(Code::kNotPermitted, "user xattrs only on files and directories");
    }
    CLF_RETURN_IF_ERROR(CheckAccess(a, r.caller(), kW));
  } else if (r.caller().uid() != 0) {
    return Status(Code::kNotPermitted, "only root may set this namespace");
  }
  Result<std::string> old = store_->GetXattr(r.handle(), r.name());
  if ((r.flags() & v1::XATTR_FLAG_CREATE) && old.ok()) return Exists("xattr exists");
  if ((r.flags() & v1::XATTR_FLAG_REPLACE) && !old.ok()) return Status(Code::kNoData, "no such attribute");
  RocksMetaStore::Batch b;
  b.PutXattr(r.handle(), r.name(), r.value());
  if (!a.has_xattrs()) {
    a.set_has_xattrs(true);
    b.PutAttr(a);
  }
  return store_->Commit(b);
}

Result<std::vector<std::string>> MetaOps::ListXattr(const v1::XattrRequest& r) {
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(r.handle()));
  (void)a;
  CLF_ASSIGN_OR_RETURN(std::vector<std::string> names, store_->ListXattrs(r.handle()));
  if (r.caller().uid() != 0) {
    names.erase(std::remove_if(names.begin(), names.end(),
                               [](const std::string& s) { return s.rfind("trusted.", 0) == 0; }),
                names.end());
  }
  return names;
}

Status MetaOps::RemoveXattr(const v1::XattrRequest& r) {
  CLF_RETURN_IF_ERROR(CheckXattrName(r.name()));
  std::lock_guard<std::mutex> l(InodeLock(r.handle()));
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(r.handle()));
  if (r.name().rfind("user.", 0) == 0) {
    CLF_RETURN_IF_ERROR(CheckAccess(a, r.caller(), kW));
  } else if (r.caller().uid() != 0) {
    return Status(Code::kNotPermitted, "only root may remove this namespace");
  }
  CLF_RETURN_IF_ERROR(store_->GetXattr(r.handle(), r.name()).status());
  CLF_ASSIGN_OR_RETURN(std::vector<std::string> names, store_->ListXattrs(r.handle()));
  RocksMetaStore::Batch b;
  b.DeleteXattr(r.handle(), r.name());
  if (names.size() <= 1) {
    a.set_has_xattrs(false);
    b.PutAttr(a);
  }
  return store_->Commit(b);
}

Result<v1::Attr> MetaOps::ReportWrite(const v1::ReportWriteRequest& r, bool estimate_blocks) {
  const Handle h = r.handle();
  if (ServerOf(h) != self_) return Status(Code::kStale, "handle is not owned by this server");
  if (r.writers_delta() < -1 || r.writers_delta() > 1) return Invalid("writers_delta must be -1, 0 or 1");
  if (r.size() > kMaxFileSize) return Status(Code::kFileTooBig, "size past the maximum file size");
  std::lock_guard<std::mutex> l(InodeLock(h));
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(h));
  if (a.type() != v1::FT_REGULAR) return Invalid("size reports are for regular files");
  if (r.writers_delta() > 0) {
    // Opening for writing needs write permission (checked here as at open).
    CLF_RETURN_IF_ERROR(CheckAccess(a, r.caller(), kW));
    a.set_writers(a.writers() + 1);
  } else if (r.writers_delta() < 0) {
    a.set_writers(a.writers() > 0 ? a.writers() - 1 : 0);
  }
  if (r.wrote()) {
    a.set_size(std::max<uint64_t>(a.size(), r.size()));
    *a.mutable_mtime() = *a.mutable_ctime() = Now();
    if (estimate_blocks) {
      // Until the queued refresh gathers it: what a dense file of this size
      // takes in 4 KiB blocks (st_blocks counts 512-byte units).
      a.set_blocks(std::max<uint64_t>(a.blocks(), (a.size() + 4095) / 4096 * 8));
    }
  }
  if (r.refresh()) {
    // Best effort: with a data server down the reported size stands and the
    // allocation stays as last gathered; the writer's open still ends here.
    v1::Attr gathered = a;
    Status g = coll_.GatherSizes({&gathered});
    if (g.ok()) {
      a = gathered;
    } else {
      CLF_LOG_WARN("size refresh of {:x}: {}", h, g.ToString());
    }
  }
  RocksMetaStore::Batch b;
  b.PutAttr(a);
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  return a;
}

Status MetaOps::Destroy(Handle h) {
  if (ServerOf(h) != self_) return Status(Code::kStale, "handle not owned here");
  std::unique_lock<std::mutex> l(InodeLock(h));
  CLF_ASSIGN_OR_RETURN(bool orphan, store_->IsOrphan(h));
  if (!orphan) return Status::Ok();  // relinked or already gone: nothing to free
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(h));
  if (a.nlink() > 0) {
    RocksMetaStore::Batch b;
    b.DeleteOrphan(h);
    return store_->Commit(b);
  }
  RocksMetaStore::Batch b;
  CLF_RETURN_IF_ERROR(DestroyLocal(a, &b));
  b.PutGarbage(h, a.layout());
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  --inodes_;
  gc_.Queue(h, a.layout());
  return Status::Ok();
}

Status MetaOps::TruncateObjects(const v1::CollFile& f, v1::Attr* a, bool* replicas_changed) {
  v1::CollectiveReply rep = coll_.CollectiveReport(v1::COLL_TRUNCATE, {f});
  if (rep.code() == 0) return Status::Ok();
  const Status failed(static_cast<Code>(rep.code()), "collective: " + rep.message());
  const Layout l = FromProto(f.layout());
  if (l.replicas <= 1) return failed;
  // A replicated file: each server that failed (a hop's failure counts its
  // whole subtree) is asked again alone; the copies of one that still fails
  // are recorded stale, unless that leaves some units without a current copy.
  std::vector<uint32_t> retry(rep.failed().begin(), rep.failed().end());
  std::sort(retry.begin(), retry.end());
  retry.erase(std::unique(retry.begin(), retry.end()), retry.end());
  for (uint32_t s : retry) {
    v1::CollectiveRequest one = coll_.Build(v1::COLL_TRUNCATE, {f});
    one.clear_targets();
    one.add_targets(s);
    std::promise<v1::CollectiveReply> p;
    std::future<v1::CollectiveReply> fut = p.get_future();
    coll_.Run(one, [&p](v1::CollectiveReply r) { p.set_value(std::move(r)); });
    if (fut.get().code() == 0) continue;
    for (uint32_t slot : SlotsOn(l, n(), s)) {
      const ServerId primary = PrimaryOfSlot(s, slot, n());
      auto& stale = *a->mutable_stale_replicas();
      if (std::none_of(stale.begin(), stale.end(), [&](const v1::ReplicaRef& x) {
            return x.primary() == primary && x.slot() == slot;
          })) {
        v1::ReplicaRef* x = stale.Add();
        x->set_primary(primary);
        x->set_slot(slot);
        *replicas_changed = true;
      }
    }
  }
  for (ServerId p : DataServers(l, n())) {
    const auto stale_of_p = std::count_if(
        a->stale_replicas().begin(), a->stale_replicas().end(),
        [&](const v1::ReplicaRef& x) { return x.primary() == p; });
    if (static_cast<uint32_t>(stale_of_p) >= l.replicas) return failed;
  }
  if (*replicas_changed) {
    CLF_LOG_WARN("truncate of {:x}: copies on servers that did not answer are now stale ({})",
                 f.handle(), rep.message());
  }
  return Status::Ok();
}

Status MetaOps::CreateObjectsCollective(const v1::CollFile& f) {
  v1::CollectiveRequest r = coll_.Build(v1::COLL_CREATE, {f});
  r.set_budget_ms(std::max<uint32_t>(cluster_.rpc_timeout_ms / 2, 50));
  std::promise<v1::CollectiveReply> p;
  std::future<v1::CollectiveReply> fut = p.get_future();
  coll_.Run(r, [&p](v1::CollectiveReply rep) { p.set_value(std::move(rep)); });
  v1::CollectiveReply rep = fut.get();
  if (rep.code() == 0) return Status::Ok();
  // Undo (paper 004: a failed participant means undoing the work done): the
  // garbage record makes the removal durable and retried until every data
  // server, the failed one included once it is back, has answered.
  Status undo = gc_.Drop(f.handle(), f.layout());
  if (!undo.ok()) {
    CLF_LOG_WARN("create of {:x} failed and its garbage record could not be written: {}",
                 f.handle(), undo.ToString());
  }
  return Status(static_cast<Code>(rep.code()), "create collective: " + rep.message());
}

void MetaOps::RemoveObjectsCollective(const v1::AdjustLinkReply& adj) {
  if (!adj.destroyed() || adj.attr().type() != v1::FT_REGULAR) return;
  v1::CollFile f;
  f.set_handle(adj.attr().handle());
  *f.mutable_layout() = adj.attr().layout();
  Result<v1::CollectiveReply> rep = coll_.Collective(v1::COLL_REMOVE, {f});
  if (!rep.ok()) return;  // the garbage record stays; the background collective retries
  gc_.Removed(f.handle());
}

Status MetaOps::RefreshSizes(const std::vector<Handle>& hs) {
  std::vector<v1::Attr> attrs;
  attrs.reserve(hs.size());
  for (Handle h : hs) {
    if (ServerOf(h) != self_) continue;
    Result<v1::Attr> a = store_->GetAttr(h);
    if (a.ok() && a->type() == v1::FT_REGULAR) attrs.push_back(std::move(*a));
  }
  if (attrs.empty()) return Status::Ok();
  // What each inode was before the gather: a change committed meanwhile (a
  // truncate, a size report) is newer than the gathered size, which must then
  // not be applied (it could bring back bytes a truncate cut off).
  std::vector<std::pair<uint64_t, v1::Timespec>> before;
  before.reserve(attrs.size());
  for (const v1::Attr& a : attrs) before.emplace_back(a.size(), a.ctime());
  std::vector<v1::Attr*> ptrs;
  for (v1::Attr& a : attrs) ptrs.push_back(&a);
  CLF_RETURN_IF_ERROR(coll_.GatherSizes(ptrs));  // one collective for all of them
  RocksMetaStore::Batch b;
  for (size_t i = 0; i < attrs.size(); ++i) {
    const v1::Attr& g = attrs[i];
    std::lock_guard<std::mutex> l(InodeLock(g.handle()));
    Result<v1::Attr> cur = store_->GetAttr(g.handle());
    if (!cur.ok()) continue;  // removed meanwhile
    if (cur->size() != before[i].first || cur->ctime().sec() != before[i].second.sec() ||
        cur->ctime().nsec() != before[i].second.nsec()) {
      continue;  // changed meanwhile
    }
    cur->set_size(std::max(cur->size(), g.size()));
    cur->set_blocks(g.blocks());
    b.PutAttr(*cur);
  }
  return store_->Commit(b);
}

}  // namespace clf::server
