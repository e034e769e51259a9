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
#include "server/ops/permissions.h"

namespace clf::server {

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
  v1::Attr dir = std::move(*d);

  // The group being built: its batch, the inode locks it holds (until the
  // batch is committed, as Remove holds one), and what it changed.
  auto batch = std::make_unique<RocksMetaStore::Batch>();
  std::vector<std::unique_lock<std::mutex>> held;
  std::unordered_set<std::mutex*> held_set;
  std::unordered_set<Handle> files;
  std::vector<v1::AdjustLinkReply> adjs;
  std::vector<size_t> members;

  auto flush = [&] {
    if (!members.empty()) {
      *dir.mutable_mtime() = *dir.mutable_ctime() = Now();
      batch->PutAttr(dir);
      Status s = store_->Commit(*batch);
      for (size_t i : members) out[i] = s;
      if (s.ok()) {
        for (const v1::AdjustLinkReply& a : adjs) AfterLinkCommit(a);
      } else {
        // Nothing of the group happened: the directory is as stored.
        Result<v1::Attr> again = GetDir(parent);
        if (again.ok()) dir = std::move(*again);
      }
    }
    batch = std::make_unique<RocksMetaStore::Batch>();
    held.clear();
    held_set.clear();
    files.clear();
    adjs.clear();
    members.clear();
  };

  for (size_t i = 0; i < rs.size(); ++i) {
    const v1::RemoveRequest& r = *rs[i];
    if (HasPendingIntentFor(r.parent(), r.name())) {
      // The source of an unsettled (or running) cross-server rename: Remove
      // settles it first and waits for a running one, which needs this
      // directory's lock to finish: called without it.
      flush();
      dl.unlock();
      out[i] = Remove(r).status();
      dl.lock();
      Result<v1::Attr> again = GetDir(parent);
      if (!again.ok()) {
        for (size_t k = i + 1; k < rs.size(); ++k) out[k] = again.status();
        return out;
      }
      dir = std::move(*again);
      continue;
    }
    if (r.parent() != parent || r.directory()) {  // not for this group: as Remove
      flush();
      out[i] = Remove(r).status();
      continue;
    }
    if (Status s = ValidateName(r.name()); !s.ok()) {
      out[i] = s;
      continue;
    }
    if (Status s = CheckAccess(dir, r.caller(), kW | kX); !s.ok()) {
      out[i] = s;
      continue;
    }
    Result<EntryValue> e = store_->GetEntry(parent, r.name());
    if (!e.ok()) {
      // A name removed earlier in this group is still in the store until the
      // group commits: names are unique in a group (the caller splits runs).
      out[i] = e.status();
      continue;
    }
    if (e->type == v1::FT_DIRECTORY) {
      out[i] = Status(Code::kIsDir, "is a directory");
      continue;
    }
    if (Status s = CheckStickyOf(dir, e->handle, r.caller()); !s.ok()) {
      out[i] = s;
      continue;
    }
    if (ServerOf(e->handle) != self_ || files.count(e->handle) != 0) {
      // Metadata elsewhere (a cross-server link), or a second name of a file
      // this group already changed: after the group, on its own.
      flush();
      out[i] = Remove(r).status();
      continue;
    }
    std::mutex* il = &InodeLock(e->handle);
    if (held_set.count(il) == 0) {
      // Never wait for an inode lock while holding another: commit first.
      std::unique_lock<std::mutex> lk(*il, std::try_to_lock);
      if (!lk.owns_lock()) {
        flush();
        lk.lock();
      }
      held_set.insert(il);
      held.push_back(std::move(lk));
    }
    // The entry, the link count and at nlink 0 the metadata and its garbage
    // record go into the group's batch.
    Result<v1::AdjustLinkReply> adj = AdjustLinkInBatch(e->handle, -1, r.keep_orphan(), batch.get());
    if (!adj.ok()) {
      // The batch may hold part of this file's change: drop the group
      // uncommitted and run its members and this one as Remove would.
      std::vector<size_t> redo = std::move(members);
      members.clear();
      flush();
      for (size_t k : redo) out[k] = Remove(*rs[k]).status();
      out[i] = Remove(r).status();
      continue;
    }
    batch->DeleteEntry(parent, r.name());
    files.insert(e->handle);
    adjs.push_back(std::move(*adj));
    members.push_back(i);
  }
  flush();
  return out;
}

}  // namespace clf::server
