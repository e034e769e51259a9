// MetaOps: the namespace and collective logic of one clfd. No gRPC types.
//
// Lock order: DirLocks's (dir_locks.h).
// Thread safety: every method is thread safe; methods may block (RocksDB, local
// files, and synchronous waits on other servers) and so run on executor threads.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "clf/v1/baseline.pb.h"
#include "clf/v1/data.pb.h"
#include "common/executor.h"
#include "clf/v1/meta.pb.h"
#include "clf/v1/peer.pb.h"
#include "common/config.h"
#include "common/status.h"
#include "server/data/object_store.h"
#include "server/ops/collective.h"
#include "server/ops/dir_locks.h"
#include "server/ops/garbage_collector.h"
#include "server/ops/peers.h"
#include "server/ops/rename_intents.h"
#include "server/store/handle_allocator.h"
#include "server/store/meta_store.h"

namespace clf::server {

struct SetAttrAsk;  // meta_ops.cc

class MetaOps {
 public:
  MetaOps(const ClusterConfig& cluster, ServerId self, RocksMetaStore* store, ObjectStore* objects,
          Peers* peers);

  // Creates the root directory on server 0 if it is missing; recovers the handle counter.
  Status Init();
  // Where this server's part of a removal collective runs (CollectiveRunner).
  void set_reaper(Executor* reaper) { coll_.set_reaper(reaper); }
  // Replicated files: the stores of this server's copies (CollectiveRunner),
  // and who to tell when a truncate marked copies stale (ReplicaStateOps).
  // Set before serving.
  void set_copies(CopyStores* copies, WriteIntents* intents) { coll_.set_copies(copies, intents); }
  void set_on_replicas_changed(std::function<void(Handle, const v1::Layout&)> f) {
    on_replicas_changed_ = std::move(f);
  }

  Result<v1::Attr> Lookup(const v1::LookupRequest& r);
  // Non-blocking parts for the service layer to run inline (RocksDB reads only):
  // LookupLocal returns false when the entry's metadata lives on another server
  // (then call Lookup on an executor); sizes are not filled (FillSizesAsync).
  Result<bool> LookupLocal(const v1::LookupRequest& r, v1::Attr* out);
  Result<v1::Attr> GetAttrLocal(Handle h);
  // The sizes of files with open writers by one stat collective, never
  // blocking (CollectiveRunner::FillSizesAsync).
  void FillSizesAsync(std::vector<v1::Attr*> attrs, std::function<void(Status)> done) {
    coll_.FillSizesAsync(std::move(attrs), std::move(done));
  }
  Result<v1::Attr> GetAttr(Handle h, const v1::Caller& c);
  // exact_sizes false: the reply's size of a file with open writers is the
  // stored one (no stat collective; Meta.Commit does not return attributes).
  Result<v1::Attr> SetAttr(const v1::SetAttrRequest& r, bool exact_sizes = true);
  // parent_out (optional) receives the directory's attributes after the change.
  // existed (optional): set when the name existed and O_CREAT without O_EXCL returned it.
  Result<v1::Attr> Create(const v1::CreateRequest& r, v1::Attr* parent_out = nullptr,
                          bool* existed = nullptr);
  Result<v1::Attr> Link(const v1::LinkRequest& r, v1::Attr* parent_out = nullptr);
  Result<v1::RemoveReply> Remove(const v1::RemoveRequest& r);
  // Meta.Commit's unlinks of regular files in one directory (rs[0]'s parent),
  // in order, with distinct names: the results of Remove for each, committed
  // as one WriteBatch with one update of the directory (group_commit.cc).
  std::vector<Status> RemoveFiles(const std::vector<const v1::RemoveRequest*>& rs);
  // session: the caller's directory-lease session (0: none), passed on to the
  // destination server of a rename across servers.
  Result<v1::RenameReply> Rename(const v1::RenameRequest& r, uint64_t session = 0);
  Result<v1::ReadDirReply> ReadDir(const v1::ReadDirRequest& r);
  // Fills the attributes of listed entries (local ones from RocksDB, others
  // batched per owning server, sizes as a stat would give them).
  Status FillEntryAttrs(google::protobuf::RepeatedPtrField<v1::DirEntry>* entries);
  Result<std::string> Readlink(Handle h);
  Result<std::string> GetXattr(const v1::XattrRequest& r);
  Status SetXattr(const v1::XattrRequest& r);
  Result<std::vector<std::string>> ListXattr(const v1::XattrRequest& r);
  Status RemoveXattr(const v1::XattrRequest& r);
  Status Destroy(Handle h);
  // Size, mtime and open-for-writing count reported by a writer (see v1::Attr.writers).
  // estimate_blocks: the allocation is set from the size (a dense file's)
  // until a refresh queued with QueueRefresh gathers the real one.
  Result<v1::Attr> ReportWrite(const v1::ReportWriteRequest& r, bool estimate_blocks = false);
  // ReportWrite's refresh for many files at once: sizes (max with the stored
  // ones) and allocation gathered by one stat collective.
  Status RefreshSizes(const std::vector<Handle>& hs);
  // RefreshSizes in the background (the GC thread), batched.
  void QueueRefresh(const std::vector<Handle>& hs) { gc_.QueueRefresh(hs); }

  // Directory leases (DirLeases holds who has which): the complete listing of
  // `dir` and the layout new files there get (first_server unset), for a
  // caller allowed to list it; kNoSpace above max_entries. with_attrs: the
  // entries' attributes too when there are at most kLeaseAttrsMax of them and
  // every server answers (reply.with_attrs says whether they came).
  Result<v1::DirLeaseReply> LeaseListing(Handle dir, const v1::Caller& c, size_t max_entries,
                                         bool with_attrs);
  static constexpr size_t kLeaseAttrsMax = 2048;
  // `count` consecutive handles of this server no create will use but a
  // Create naming one of them (the lease holder's commits); returns the
  // first (HandleAllocator: never given twice, not even across a restart).
  Result<Handle> ReserveHandles(uint32_t count);

  // Peer side.
  Result<v1::Attr> PeerMakeDir(const v1::MakeDirRequest& r);
  Status PeerRemoveDir(Handle h);
  Result<v1::AdjustLinkReply> PeerAdjustLink(const v1::AdjustLinkRequest& r);
  Result<std::vector<v1::Attr>> PeerGetAttrs(const std::vector<Handle>& hs);
  Result<v1::InsertEntryReply> PeerInsertEntry(const v1::InsertEntryRequest& r);
  // Cross-server rename, destination side (rename_intent.cc): was intent
  // `id` applied here? If not, it is recorded as aborted (a later InsertEntry
  // carrying it is refused). Takes no directory lock.
  Result<v1::ResolveRenameReply> PeerResolveRename(uint64_t id) { return intents_.Resolve(id); }
  // Destination side: every intent of ServerOf(settled_below) below it is
  // settled at its source; deletes their outcome records ('P') and refuses
  // an InsertEntry carrying one of them from now on. Returns how many were deleted.
  Result<uint32_t> PeerForgetRenames(uint64_t settled_below) {
    return intents_.ForgetBelow(settled_below);
  }
  // Records of the protocol: pending intents here as source ('R'), outcome
  // records kept here as destination ('P').
  size_t rename_intent_count() { return intents_.pending_count(); }
  size_t rename_outcome_count() const { return intents_.outcome_count(); }

  // Rename intents whose outcome is unknown (the destination did not answer)
  // and replaced files' link drops not yet applied are settled in the
  // background: RunRenameIntents() runs until StopRenameIntents(); call it
  // on a dedicated thread.
  void RunRenameIntents() {
    intents_.Run([this] { SettleRenameIntents(); });
  }
  void StopRenameIntents() { intents_.Stop(); }
  // One pass: tries every pending intent and link drop once (those whose
  // Rename call still runs are left to it), then tells destinations which of
  // this server's intents are settled (Peer.ForgetRenames); returns how many
  // are still pending.
  size_t SettleRenameIntents();
  // Runs this server's part of a collective and forwards the rest down the
  // binary tree; `done` runs once, with everything gathered.
  void RunCollective(const v1::CollectiveRequest& r,
                     std::function<void(v1::CollectiveReply)> done) {
    coll_.Run(r, std::move(done));
  }

  // metadata_mode = "client" (ClientModeOps, client_mode.cc): its namespace
  // steps. A handle for a new regular file in r.parent (write and search
  // permission checked) and the layout Create will give it there.
  struct Reserved {
    Handle handle = 0;
    Layout layout;
  };
  Result<Reserved> ReserveForCreate(const v1::ReserveRequest& r);
  // The unlink of a regular file whose inode is here, in one batch and
  // without a garbage record (file_gone: nlink reached 0 and the caller
  // frees its objects). nullopt: not such a name (a directory, a file of
  // another server, keep_orphan): use Remove.
  struct Unlinked {
    v1::RemoveReply remove;
    bool file_gone = false;
    v1::Layout layout;  // with file_gone
  };
  Result<std::optional<Unlinked>> UnlinkHere(const v1::RemoveRequest& r);

  uint64_t inode_count() const;
  const ClusterConfig& cluster() const { return cluster_; }
  // fsck: the directory and inode locks its repairs take; the pending rename
  // intents, each with whether its Rename call still runs; the settle of one
  // intent or link drop (FSCK_REPAIR_SETTLE_RENAME).
  DirLocks& locks() { return locks_; }
  std::vector<std::pair<v1::RenameIntent, bool>> PendingRenames() { return intents_.Pending(); }
  Status SettleRename(uint64_t id);
  // Makes every metadata change made so far durable (the RocksDB WAL).
  Status SyncWal();
  // The background removal of removed files' objects and the size
  // refreshes (garbage_collector.h).
  bool CollectGarbage() { return gc_.Collect(); }
  // Runs until StopGc(); call on a dedicated thread.
  void RunGc() { gc_.Run(); }
  void StopGc() { gc_.Stop(); }
  // The purge throttle: a client request arrived.
  void NoteForeground() { gc_.NoteForeground(); }

 private:
  uint32_t n() const { return cluster_.size(); }
  std::recursive_mutex& DirLock(Handle h) { return locks_.Dir(h); }
  std::mutex& InodeLock(Handle h) { return locks_.Inode(h); }

  // metadata_mode = "collective": the CREATE collective of one new file, within
  // half the RPC timeout (so its error reaches the client before the client's
  // deadline). On failure the objects some participants may have made are
  // recorded as garbage (the background REMOVE collective retries until every
  // server answered) and the error names the failed server.
  Status CreateObjectsCollective(const v1::CollFile& f);
  // Rename within this server (both directories' locks held), not an
  // exchange: `e` moved from the source name to the target (`old`, the
  // entry it replaces, checked first) in `b`; returns whether a file was
  // replaced (its link is the caller's to drop after the commit).
  // A rename's target `old` in `dir`, replaced by an entry that is a
  // directory or not (moving_dir): the type and sticky checks, then a
  // replaced directory (empty) removed. Returns whether it was a directory.
  // Both the same-server rename and Peer.InsertEntry use it.
  Result<bool> ReplaceTarget(bool moving_dir, const EntryValue& old, const v1::Attr& dir,
                             const v1::Caller& c);
  Result<bool> MoveEntryHere(const v1::RenameRequest& r, const EntryValue& e,
                             const std::optional<EntryValue>& old, bool one_dir, v1::Attr* sdir,
                             v1::Attr* ddir, RocksMetaStore::Batch* b);
  // Create's new entry `a` (its attributes but the handle): a directory,
  // placed by hash (on another server through Peer.MakeDir), or any other
  // file, kept here; its records added to `b`.
  Status MakeDirectory(const v1::CreateRequest& r, v1::Attr* a, RocksMetaStore::Batch* b);
  Status MakeNonDirectory(const v1::CreateRequest& r, const v1::Attr& dir, v1::Attr* a,
                          RocksMetaStore::Batch* b);
  // SetAttr's truncate of a file's objects (the TRUNCATE collective). A
  // replicated file's copies on servers that do not answer are added to
  // a->stale_replicas (*replicas_changed set) as long as every unit keeps a
  // current copy; otherwise, and for unreplicated files, the failure.
  Status TruncateObjects(const v1::CollFile& f, v1::Attr* a, bool* replicas_changed);
  // SetAttr's steps that need the store or the servers: the kill-priv of a
  // write, truncate or chown (the capability's removal added to `b`;
  // returns whether anything was cleared), and the truncate.
  Result<bool> ApplyKillPriv(v1::Attr* a, const SetAttrAsk& q, bool kill_asked,
                             RocksMetaStore::Batch* b);
  Status TruncateTo(v1::Attr* a, const SetAttrAsk& q, bool* replicas_changed);
  // metadata_mode = "collective": paper 004's synchronous REMOVE collective of
  // a file Remove just destroyed (its garbage record committed and queued);
  // on success the record is dropped (the queued entry then removes nothing).
  // A failure leaves the record for the background collective.
  void RemoveObjectsCollective(const v1::AdjustLinkReply& adj);
  Result<v1::Attr> AttrAnywhere(Handle h);  // local store or the owning server
  Result<v1::Attr> GetDir(Handle h);         // local directory attributes (NotDir otherwise)
  Status RemoveDirLocal(Handle h);
  Status RemoveDirAnywhere(Handle h);  // here or on the directory's server
  // Sticky-directory rule for removing or replacing `child`; fetches the
  // child's attributes only when `dir` is sticky.
  Status CheckStickyOf(const v1::Attr& dir, Handle child, const v1::Caller& c);
  // Name checks, search permission on the parent, then the entry: Lookup's first half.
  Result<EntryValue> FindEntry(const v1::LookupRequest& r);
  Result<v1::AdjustLinkReply> AdjustLinkLocal(Handle h, int delta, bool keep_orphan);
  // AdjustLinkLocal's change added to `b` (caller holds InodeLock(h) and commits);
  // AfterLinkCommit then does the in-memory follow-up (inode count, garbage queue).
  Result<v1::AdjustLinkReply> AdjustLinkInBatch(Handle h, int delta, bool keep_orphan,
                                                RocksMetaStore::Batch* b);
  void AfterLinkCommit(const v1::AdjustLinkReply& rep);
  Result<v1::AdjustLinkReply> AdjustLinkAnywhere(Handle h, int delta, bool keep_orphan);
  Status DestroyLocal(const v1::Attr& a, RocksMetaStore::Batch* b);
  // RemoveFiles's batch of unlinks (group_commit.cc).
  class UnlinkGroup;

  // The rename intent protocol's steps (rename_intent.cc; the records are
  // RenameIntents's). Lock order: DirLock, then intents_.Lock(id), then
  // InodeLock. No directory lock is held while a Rename call waits for the
  // destination.
  Result<v1::RenameReply> RenameAcrossServers(const v1::RenameRequest& r, uint64_t session);
  // One attempt; *busy set when the destination refused because its target
  // name is the source of one of its own renames in flight (then nothing
  // happened and the attempt may be repeated).
  Result<v1::RenameReply> RenameAcrossOnce(const v1::RenameRequest& r, uint64_t session,
                                           bool* busy);
  using DirGuard = std::unique_lock<std::recursive_mutex>;
  // RenameAcrossOnce's checks of the source (caller holds *sl): the intent
  // to record, without its id.
  Result<v1::RenameIntent> CheckRenameSource(const v1::RenameRequest& r, DirGuard* sl);
  // RenameAcrossOnce's end, with *sl released: the destination's answer
  // `irep` applied, or its outcome asked for and applied; takes *sl again.
  Result<v1::InsertEntryReply> SettleOwnIntent(const v1::RenameIntent& in,
                                               const Result<v1::InsertEntryReply>& irep,
                                               DirGuard* sl, bool* busy);
  // PeerInsertEntry's change of the directory: the entry put in `b` (or
  // rep->same_file set), the replaced entry checked; returns whether a file
  // was replaced (its link is the caller's to drop).
  Result<bool> PlaceInsertedEntry(const v1::InsertEntryRequest& r, v1::Attr* dir,
                                  v1::InsertEntryReply* rep, RocksMetaStore::Batch* b);
  struct SourceName {
    Handle parent;
    const std::string& name;
  };
  // For names whose directories' locks the caller holds (through `held`, one
  // or two guards): first waits, with `held` released, until no Rename call
  // of this server with one of them as its source is still running (an
  // empty `held`: kBusy instead of waiting); then settles their other pending
  // intents. Unavailable while one stays unknown.
  Status SettlePendingFor(std::initializer_list<SourceName> names,
                          std::initializer_list<DirGuard*> held);
  // Asks the destination about `in` and completes or rolls it back; caller
  // holds DirLock(in.src_parent()). Unavailable when the destination did not answer.
  Result<v1::ResolveRenameReply> ResolveIntent(const v1::RenameIntent& in);
  // ResolveIntent's halves: the question to D (no lock needed: D's answer is
  // final) and its application (caller holds DirLock(in.src_parent())).
  Result<v1::ResolveRenameReply> AskOutcome(const v1::RenameIntent& in);
  Status ApplyOutcome(const v1::RenameIntent& in, const v1::ResolveRenameReply& res);
  // The source half of an applied intent: deletes the source entry and the
  // intent in one batch (only the intent when same_file); caller holds
  // DirLock(in.src_parent()).
  Status CompleteIntent(const v1::RenameIntent& in, bool same_file);
  // The background's settle of one intent not in flight (asks D without the
  // source directory's lock); kStale if it is no longer pending, kBusy while
  // its Rename call runs, kUnavailable when D does not answer.
  Status SettleOne(uint64_t id);
  // The replaced file's nlink -1 on its (other) server, at most once (op id = intent id).
  Result<v1::AdjustLinkReply> ApplyLinkDrop(uint64_t id, const v1::PendingLinkDrop& d);
  Result<v1::AdjustLinkReply> AdjustLinkOnce(const v1::AdjustLinkRequest& r);

  std::function<void(Handle, const v1::Layout&)> on_replicas_changed_;  // set before serving

  const ClusterConfig cluster_;
  const ServerId self_;
  RocksMetaStore* store_;
  ObjectStore* objects_;
  Peers* peers_;
  HandleAllocator handles_{self_, store_};
  std::atomic<int64_t> inodes_{0};
  DirLocks locks_;
  RenameIntents intents_{self_, cluster_.size(), store_, peers_};
  CollectiveRunner coll_{cluster_, self_, objects_, peers_};
  GarbageCollector gc_{
      cluster_, store_, objects_,
      [this](std::vector<v1::CollFile> files) {
        return coll_.Collective(v1::COLL_REMOVE, std::move(files));
      },
      [this](const std::vector<Handle>& hs) { return RefreshSizes(hs); }};
};

}  // namespace clf::server
