// Group commit of Meta.Commit's unlinks: a run of unlinks of regular files in
// one directory becomes one RocksDB WriteBatch with one update of the
// directory's attributes, instead of a WriteBatch (WAL record, memtable
// insert, directory read and write) per file. The results are those of
// calling Remove for each request in order.
#include <memory>
#include <mutex>
#include <unordered_set>

#include "common/log.h"
#include "server/ops/meta_ops.h"
#include "server/ops/ops_internal.h"
#include "server/ops/permissions.h"

namespace clf::server {

// The group being built: its batch, the inode locks it holds (until the
// batch is committed, as Remove holds one), and what it changed. The caller
// holds the directory's lock.
class MetaOps::UnlinkGroup {
 public:
  UnlinkGroup(MetaOps* ops, Handle parent, v1::Attr dir, std::vector<Status>* out)
      : ops_(ops), parent_(parent), dir_(std::move(dir)), out_(out) {}

  // Commits the group (its members' results are the commit's) and starts
  // the next one.
  void Flush() {
    if (!members_.empty()) {
      *dir_.mutable_mtime() = *dir_.mutable_ctime() = Now();
      batch_->PutAttr(dir_);
      Status s = ops_->store_->Commit(*batch_);
      for (size_t i : members_) (*out_)[i] = s;
      if (s.ok()) {
        for (const v1::AdjustLinkReply& a : adjs_) ops_->AfterLinkCommit(a);
      } else {
        // Nothing of the group happened: the directory is as stored.
        Reload().IgnoreError();
      }
    }
    Reset();
  }
  // Drops the group uncommitted; returns its members, to run on their own.
  std::vector<size_t> Drop() {
    std::vector<size_t> members = std::move(members_);
    Reset();
    return members;
  }
  // The directory as stored (after its lock was released).
  Status Reload() {
    CLF_ASSIGN_OR_RETURN(dir_, ops_->GetDir(parent_));
    return Status::Ok();
  }
  // Remove's checks of one unlink against the group's directory: the entry.
  Result<EntryValue> Check(const v1::RemoveRequest& r) {
    CLF_RETURN_IF_ERROR(ValidateName(r.name()));
    CLF_RETURN_IF_ERROR(CheckAccess(dir_, r.caller(), kW | kX));
    // A name removed earlier in this group is still in the store until the
    // group commits: names are unique in a group (the caller splits runs).
    CLF_ASSIGN_OR_RETURN(EntryValue e, ops_->store_->GetEntry(parent_, r.name()));
    if (e.type == v1::FT_DIRECTORY) return Status(Code::kIsDir, "is a directory");
    CLF_RETURN_IF_ERROR(ops_->CheckStickyOf(dir_, e.handle, r.caller()));
    return e;
  }
  bool Changed(Handle h) const { return files_.count(h) != 0; }
  // Takes h's inode lock; never waits for one while holding another: the
  // group is committed first.
  void LockInode(Handle h) {
    std::mutex* il = &ops_->InodeLock(h);
    if (held_set_.count(il) != 0) return;
    std::unique_lock<std::mutex> lk(*il, std::try_to_lock);
    if (!lk.owns_lock()) {
      Flush();
      lk.lock();
    }
    held_set_.insert(il);
    held_.push_back(std::move(lk));
  }
  // Member i: the entry, the link count and at nlink 0 the metadata and its
  // garbage record go into the group's batch. False if that failed (the
  // batch may hold part of the change: Drop the group).
  bool Add(size_t i, const v1::RemoveRequest& r, const EntryValue& e) {
    Result<v1::AdjustLinkReply> adj =
        ops_->AdjustLinkInBatch(e.handle, -1, r.keep_orphan(), batch_.get());
    if (!adj.ok()) return false;
    batch_->DeleteEntry(parent_, r.name());
    files_.insert(e.handle);
    adjs_.push_back(std::move(*adj));
    members_.push_back(i);
    return true;
  }

 private:
  void Reset() {
    batch_ = std::make_unique<RocksMetaStore::Batch>();
    held_.clear();
    held_set_.clear();
    files_.clear();
    adjs_.clear();
    members_.clear();
  }

  MetaOps* const ops_;
  const Handle parent_;
  v1::Attr dir_;
  std::vector<Status>* const out_;
  std::unique_ptr<RocksMetaStore::Batch> batch_ = std::make_unique<RocksMetaStore::Batch>();
  std::vector<std::unique_lock<std::mutex>> held_;
  std::unordered_set<std::mutex*> held_set_;
  std::unordered_set<Handle> files_;
  std::vector<v1::AdjustLinkReply> adjs_;
  std::vector<size_t> members_;
};

std::vector<Status> MetaOps::RemoveFiles(const std::vector<const v1::RemoveRequest*>& rs) {
  std::vector<Status> out(rs.size());
  if (rs.empty()) return out;
  const Handle parent = rs.front()->parent();
  std::unique_lock<std::recursive_mutex> dl(DirLock(parent));
  Result<v1::Attr> d = GetDir(parent);
  if (!d.ok()) {
    for (Status& s : out) s = d.status();
    return out;
  }
  UnlinkGroup g(this, parent, std::move(*d), &out);
  for (size_t i = 0; i < rs.size(); ++i) {
    const v1::RemoveRequest& r = *rs[i];
    if (intents_.HasPendingFor(r.parent(), r.name())) {
      // The source of an unsettled (or running) cross-server rename: Remove
      // settles it first and waits for a running one, which needs this
      // directory's lock to finish: called without it.
      g.Flush();
      dl.unlock();
      out[i] = Remove(r).status();
      dl.lock();
      if (Status s = g.Reload(); !s.ok()) {
        for (size_t k = i + 1; k < rs.size(); ++k) out[k] = s;
        return out;
      }
      continue;
    }
    if (r.parent() != parent || r.directory()) {  // not for this group: as Remove
      g.Flush();
      out[i] = Remove(r).status();
      continue;
    }
    Result<EntryValue> e = g.Check(r);
    if (!e.ok()) {
      out[i] = e.status();
      continue;
    }
    if (ServerOf(e->handle) != self_ || g.Changed(e->handle)) {
      // Metadata elsewhere (a cross-server link), or a second name of a file
      // this group already changed: after the group, on its own.
      g.Flush();
      out[i] = Remove(r).status();
      continue;
    }
    g.LockInode(e->handle);
    if (!g.Add(i, r, *e)) {
      // Run the dropped group's members and this one as Remove would.
      for (size_t k : g.Drop()) out[k] = Remove(*rs[k]).status();
      out[i] = Remove(r).status();
    }
  }
  g.Flush();
  return out;
}

}  // namespace clf::server
