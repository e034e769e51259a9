// The cross-server rename: an intent record on the source server S, the
// destination server D's "applied intents" record in the entry's WriteBatch,
// and ResolveRename to settle an intent whose InsertEntry got no answer
// (docs/ARCHITECTURE.md, rename).
//
// Invariants:
//  - S holds an 'R' record for intent X from before it calls D until it has
//    either deleted the source entry (same batch as the record's deletion) or
//    learnt that D will never apply X.
//  - No directory lock is held while a Rename call waits for another server:
//    S commits 'R' under the source directory's lock, releases the lock, calls
//    D, and takes the lock again to complete or roll back. So two opposite (or
//    cyclic) renames never wait on each other's directory locks.
//  - While X's Rename call runs ("in flight") its source name is held by X:
//    every operation of S that could change or replace that entry (Rename,
//    Remove, the group-committed and client-mode unlinks) first waits, with
//    its directory locks released, until the call has ended, then settles what
//    is still pending (SettlePendingFor). Peer.InsertEntry onto such a name
//    answers kBusy instead (a peer handler never waits for a rename: two
//    renames each targeting the other's held source would wait on each
//    other); its caller then fences and rolls back its own intent, which
//    releases its source name, and retries after a random back-off.
//  - On D, "X applied" ('P' applied) is committed in the batch that inserts
//    the entry; "X aborted" ('P' aborted) is committed by ResolveRename only
//    when no applied record exists. Both under IntentLock(X), so exactly one
//    of them ever exists and a late InsertEntry for an aborted X is refused.
//  - Intent ids of S are allocated in increasing order and counted in flight
//    from allocation. S tells D (ForgetRenames) that every intent of S below
//    W = its lowest id pending or in flight (or the next id) is settled; D
//    then deletes its 'P' records of S below W and persists W ('W' record,
//    same batch). Under IntentLock(X) D reads 'P'(X) before W, so an
//    InsertEntry carrying an X < W is refused whether its record is still
//    there or already deleted: pruning never lets a late insert apply.
//  - A replaced file whose metadata lives on D loses its link in the entry's
//    batch; one on a third server gets a 'K' record in that batch, applied by
//    AdjustLink with op_id X ('J' record on that server: at most once) and
//    then deleted; replayed at start and retried in the background.
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "common/log.h"
#include "server/ops/meta_ops.h"
#include "server/ops/ops_internal.h"
#include "server/ops/permissions.h"

namespace clf::server {
namespace {

constexpr uint64_t kIntentBlock = 4096;  // ids reserved per high-water commit
constexpr int kInsertSlowMs = 200;       // CLF_TEST_FAULT=insert_slow

// Test-only fault points (CLF_TEST_FAULT=<name>): the process dies there as
// from kill -9, to test the recovery of the records above. Read once.
bool FaultAt(const char* name) {
  static const char* fault = ::getenv("CLF_TEST_FAULT");
  return fault != nullptr && std::strcmp(fault, name) == 0;
}

void MaybeDie(const char* name) {
  if (!FaultAt(name)) return;
  CLF_LOG_WARN("CLF_TEST_FAULT={}: exiting as killed", name);
  ::_exit(137);
}

// Before attempt `attempt` + 1 of a rename whose destination answered kBusy:
// 1..2^attempt ms (at most 32), random, so two renames refused by each
// other do not retry in step.
void BackOff(int attempt) {
  thread_local std::minstd_rand rng(std::random_device{}());
  std::uniform_int_distribution<int> ms(1, 1 << std::min(attempt, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(ms(rng)));
}

void Relock(std::initializer_list<std::unique_lock<std::recursive_mutex>*> held) {
  if (held.size() == 1) {
    (*held.begin())->lock();
  } else if (held.size() == 2) {
    std::lock(**held.begin(), **(held.begin() + 1));
  }
}

}  // namespace

Status MetaOps::LoadRenameIntents() {
  std::lock_guard<std::mutex> l(intents_mu_);
  pending_intents_.clear();
  uint64_t max_seen = 0;
  for (auto& [id, value] : store_->RenameIntents()) {
    v1::RenameIntent in;
    if (!in.ParseFromString(value) || in.id() != id) {
      return Internal("corrupt rename intent record " + std::to_string(id));
    }
    pending_intents_.emplace(id, std::move(in));
    if (ServerOf(id) == self_) max_seen = std::max(max_seen, id & kCounterMask);
  }
  // Ids up to the persisted mark may have been used before a crash; never reuse one
  // (D's outcome record for an old id would answer for the new intent).
  next_intent_ = std::max(store_->IntentHighWater(), max_seen + 1);
  if (next_intent_ == 0) next_intent_ = 1;
  intent_limit_ = next_intent_;
  // Any id below the next one may have an outcome record on any destination,
  // if this server ever made an intent (its high-water mark is set). Else no
  // destination is told anything: a call to a peer not up yet (cluster start)
  // would put the channel to it into reconnect back-off for the first requests.
  forget_sent_.clear();
  sent_max_.clear();
  for (ServerId d = 0; d < n(); ++d) {
    if (d == self_) continue;
    sent_max_[d] = 0;
    if (store_->IntentHighWater() != 0) sent_max_[d] = MakeHandle(self_, next_intent_) - 1;
  }
  if (!pending_intents_.empty()) {
    CLF_LOG_INFO("{} cross-server rename intents to settle", pending_intents_.size());
  }
  return Status::Ok();
}

uint64_t MetaOps::NewIntentId() {
  std::lock_guard<std::mutex> l(intents_mu_);
  if (next_intent_ >= intent_limit_) {
    RocksMetaStore::Batch b;
    b.PutIntentHighWater(next_intent_ + kIntentBlock);
    Status s = store_->Commit(b);
    if (!s.ok()) return 0;
    intent_limit_ = next_intent_ + kIntentBlock;
  }
  const uint64_t id = MakeHandle(self_, next_intent_++);
  in_flight_.insert(id);
  return id;
}

void MetaOps::EndInFlight(uint64_t id) {
  {
    std::lock_guard<std::mutex> l(intents_mu_);
    in_flight_.erase(id);
  }
  in_flight_cv_.notify_all();
}

Status MetaOps::DropIntent(uint64_t id) {
  RocksMetaStore::Batch b;
  b.DeleteRenameIntent(id);
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  std::lock_guard<std::mutex> l(intents_mu_);
  pending_intents_.erase(id);
  return Status::Ok();
}

Status MetaOps::CompleteIntent(const v1::RenameIntent& in, bool same_file) {
  // same_file: the destination name already named this file, so the rename
  // changes nothing (POSIX) and the source entry stays.
  if (same_file) return DropIntent(in.id());
  RocksMetaStore::Batch b;
  Result<EntryValue> e = store_->GetEntry(in.src_parent(), in.src_name());
  if (e.ok() && e->handle == in.handle()) {
    b.DeleteEntry(in.src_parent(), in.src_name());
    Result<v1::Attr> sdir = store_->GetAttr(in.src_parent());
    if (sdir.ok()) {
      if (in.type() == v1::FT_DIRECTORY) sdir->set_nlink(sdir->nlink() > 2 ? sdir->nlink() - 1 : 2);
      *sdir->mutable_mtime() = *sdir->mutable_ctime() = Now();
      b.PutAttr(*sdir);
    }
  } else {
    // Every operation that could change the source entry settles its intents
    // first (SettlePendingFor), so this is only reached through a path that
    // does not (documented in docs/ARCHITECTURE.md).
    CLF_LOG_ERROR("rename intent {:x}: source entry {} changed before the rename settled", in.id(),
                  in.src_name());
  }
  b.DeleteRenameIntent(in.id());
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  std::lock_guard<std::mutex> l(intents_mu_);
  pending_intents_.erase(in.id());
  return Status::Ok();
}

Result<v1::ResolveRenameReply> MetaOps::AskOutcome(const v1::RenameIntent& in) {
  v1::ResolveRenameRequest q;
  q.set_intent_id(in.id());
  return peers_->ResolveRename(ServerOf(in.dst_parent()), q);
}

Result<v1::ResolveRenameReply> MetaOps::ResolveIntent(const v1::RenameIntent& in) {
  CLF_ASSIGN_OR_RETURN(v1::ResolveRenameReply res, AskOutcome(in));
  CLF_RETURN_IF_ERROR(ApplyOutcome(in, res));
  return res;
}

Status MetaOps::ApplyOutcome(const v1::RenameIntent& in, const v1::ResolveRenameReply& res) {
  if (res.applied()) {
    CLF_RETURN_IF_ERROR(CompleteIntent(in, res.reply().same_file()));
  } else {
    CLF_RETURN_IF_ERROR(DropIntent(in.id()));
  }
  return Status::Ok();
}

bool MetaOps::HasPendingIntentFor(Handle parent, const std::string& name) {
  std::lock_guard<std::mutex> l(intents_mu_);
  for (const auto& [id, in] : pending_intents_) {
    if (in.src_parent() == parent && in.src_name() == name) return true;
  }
  return false;
}

Status MetaOps::SettlePendingFor(std::initializer_list<SourceName> names,
                                 std::initializer_list<DirGuard*> held) {
  CLF_CHECK(held.size() <= 2);
  auto names_it = [&](const v1::RenameIntent& in) {
    for (const SourceName& n : names) {
      if (in.src_parent() == n.parent && in.src_name() == n.name) return true;
    }
    return false;
  };
  // A running rename ends within its two calls' deadlines; the bound only
  // guards against a caller that holds a directory lock twice (not released here).
  const auto limit = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(2 * uint64_t{cluster_.rpc_timeout_ms});
  std::vector<v1::RenameIntent> mine;
  for (;;) {
    std::vector<uint64_t> running;
    mine.clear();
    {
      std::lock_guard<std::mutex> l(intents_mu_);
      for (const auto& [id, in] : pending_intents_) {
        if (!names_it(in)) continue;
        if (in_flight_.count(id) != 0) {
          running.push_back(id);
        } else {
          mine.push_back(in);
        }
      }
    }
    if (running.empty()) break;
    if (held.size() == 0) {
      return Status(Code::kBusy, "the name is the source of a rename in progress here");
    }
    // The running rename takes its source directory's lock to finish: wait without ours.
    for (DirGuard* g : held) g->unlock();
    bool ended;
    {
      std::unique_lock<std::mutex> l(intents_mu_);
      ended = in_flight_cv_.wait_until(l, limit, [&] {
        return std::none_of(running.begin(), running.end(),
                            [&](uint64_t id) { return in_flight_.count(id) != 0; });
      });
    }
    Relock(held);
    if (!ended) return Status(Code::kBusy, "a rename of this name is still in progress");
  }
  // No new rename of these names starts while their directories' locks are held.
  for (const v1::RenameIntent& in : mine) {
    Result<v1::ResolveRenameReply> r = ResolveIntent(in);
    if (!r.ok()) {
      return Status(Code::kUnavailable, "an earlier rename of " + in.src_name() +
                                            " is not settled yet (its destination server did "
                                            "not answer): " + r.status().ToString());
    }
  }
  return Status::Ok();
}

Result<v1::RenameReply> MetaOps::RenameAcrossServers(const v1::RenameRequest& r,
                                                     uint64_t session) {
  if (r.flags() & v1::RENAME_FLAG_EXCHANGE) return Status(Code::kNotSupported, "RENAME_EXCHANGE across servers");
  // An attempt refused with kBusy changed nothing (its intent was fenced and
  // dropped): retried, within a quarter of the RPC timeout, then answered EBUSY.
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(cluster_.rpc_timeout_ms / 4);
  for (int attempt = 0;; ++attempt) {
    bool busy = false;
    Result<v1::RenameReply> rep = RenameAcrossOnce(r, session, &busy);
    if (!busy || std::chrono::steady_clock::now() >= give_up) return rep;
    CLF_LOG_DEBUG("rename {} -> {:x}/{}: destination name held by a rename of its own, retry {}",
                  r.src_name(), r.dst_parent(), r.dst_name(), attempt + 1);
    BackOff(attempt);
  }
}

Result<v1::RenameReply> MetaOps::RenameAcrossOnce(const v1::RenameRequest& r, uint64_t session,
                                                  bool* busy) {
  DirGuard sl(DirLock(r.src_parent()));
  CLF_RETURN_IF_ERROR(SettlePendingFor({{r.src_parent(), r.src_name()}}, {&sl}));
  CLF_ASSIGN_OR_RETURN(v1::Attr sdir, GetDir(r.src_parent()));
  CLF_RETURN_IF_ERROR(CheckAccess(sdir, r.caller(), kW | kX));
  CLF_ASSIGN_OR_RETURN(EntryValue e, store_->GetEntry(r.src_parent(), r.src_name()));
  CLF_RETURN_IF_ERROR(CheckStickyOf(sdir, e.handle, r.caller()));
  if (e.type == v1::FT_DIRECTORY && e.handle == r.dst_parent()) {
    return Invalid("cannot move a directory into itself");
  }
  v1::RenameIntent in;
  in.set_id(NewIntentId());
  if (in.id() == 0) return IoError("rename: cannot record an intent id");
  // Until this call ends the background leaves the intent alone (asking D
  // now would abort an insert that is merely slow), and operations on the
  // source name wait for it (SettlePendingFor). Ended before `sl` is released.
  struct InFlight {
    MetaOps* ops;
    uint64_t id;
    ~InFlight() { ops->EndInFlight(id); }
  } in_flight{this, in.id()};
  in.set_src_parent(r.src_parent());
  in.set_src_name(r.src_name());
  in.set_handle(e.handle);
  in.set_type(e.type);
  in.set_dst_parent(r.dst_parent());
  in.set_dst_name(r.dst_name());
  in.set_flags(r.flags());
  in.set_keep_orphan(r.keep_orphan());
  const ServerId d = ServerOf(r.dst_parent());
  {
    RocksMetaStore::Batch b;
    b.PutRenameIntent(in.id(), in.SerializeAsString());
    CLF_RETURN_IF_ERROR(store_->Commit(b));
    std::lock_guard<std::mutex> l(intents_mu_);
    pending_intents_.emplace(in.id(), in);
    sent_max_[d] = std::max(sent_max_[d], in.id());
  }
  // The intent holds the source name now; D is called without the source
  // directory's lock, so a rename D is running into this directory (an
  // opposite rename) is not waited on.
  sl.unlock();
  MaybeDie("rename_after_intent");
  v1::InsertEntryRequest ir;
  ir.set_parent(r.dst_parent());
  ir.set_name(r.dst_name());
  ir.set_handle(e.handle);
  ir.set_type(e.type);
  ir.set_flags(r.flags());
  ir.set_keep_orphan(r.keep_orphan());
  ir.set_intent_id(in.id());
  ir.set_session(session);
  *ir.mutable_caller() = r.caller();
  Result<v1::InsertEntryReply> irep = peers_->InsertEntry(d, ir);
  v1::InsertEntryReply applied;
  if (irep.ok()) {
    MaybeDie("rename_after_insert");
    sl.lock();
    CLF_RETURN_IF_ERROR(CompleteIntent(in, irep->same_file()));
    applied = *irep;
  } else {
    // No answer, a refusal, or a deadline: D may still apply it. Ask (no lock
    // needed: D's answer is final); D fences X if not applied.
    Result<v1::ResolveRenameReply> res = AskOutcome(in);
    if (!res.ok()) {
      CLF_LOG_WARN("rename {} -> {:x}/{}: outcome unknown, settled in the background: {} / {}",
                   r.src_name(), r.dst_parent(), r.dst_name(), irep.status().ToString(),
                   res.status().ToString());
      return Status(Code::kUnavailable,
                    "rename across servers: destination did not answer (the rename is settled "
                    "when it does): " + irep.status().ToString());
    }
    sl.lock();
    CLF_RETURN_IF_ERROR(ApplyOutcome(in, *res));
    if (!res->applied()) {
      // Rolled back. A refusal keeps its own error (kBusy: the caller may try
      // again); no answer in time becomes kTimedOut, so the caller can tell
      // "not applied" from "not known yet" (kUnavailable).
      if (irep.status().code() == Code::kBusy) *busy = true;
      if (irep.status().code() != Code::kUnavailable) return irep.status();
      return Status(Code::kTimedOut, "rename across servers not applied: destination did not "
                                     "answer in time: " + irep.status().ToString());
    }
    applied = res->reply();
  }
  v1::RenameReply rep;
  rep.set_replaced_handle(applied.replaced_handle());
  rep.set_orphaned(applied.orphaned());
  return rep;
}

// ---------------------------------------------------------------- destination side

Result<v1::InsertEntryReply> MetaOps::PeerInsertEntry(const v1::InsertEntryRequest& r) {
  CLF_RETURN_IF_ERROR(ValidateName(r.name()));
  // Test-only: a slow destination, so a test can act while the rename is in flight.
  if (r.intent_id() != 0 && FaultAt("insert_slow")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kInsertSlowMs));
  }
  DirGuard dl(DirLock(r.parent()));
  // The name may itself be the source of one of this server's unsettled
  // renames: settled first; one still running answers kBusy (no wait here).
  CLF_RETURN_IF_ERROR(SettlePendingFor({{r.parent(), r.name()}}, {}));
  const uint64_t id = r.intent_id();
  std::unique_lock<std::mutex> il;
  if (id != 0) {
    il = std::unique_lock<std::mutex>(IntentLock(id));
    Result<std::string> prior = store_->GetRenameOutcome(id);
    if (prior.ok()) {
      v1::RenameOutcome o;
      if (!o.ParseFromString(*prior)) return Internal("corrupt rename outcome record");
      if (!o.applied()) return Status(Code::kCancelled, "rename intent was aborted");
      return o.reply();  // a repeat of an applied insert
    } else if (prior.status().code() != Code::kNotFound) {
      return prior.status();
    }
    // Read after the record: ForgetRenames deletes records and raises the mark in one batch.
    if (id < store_->RenameWatermark(ServerOf(id))) {
      return Status(Code::kCancelled, "rename intent already settled at its source");
    }
  }
  CLF_ASSIGN_OR_RETURN(v1::Attr dir, GetDir(r.parent()));
  CLF_RETURN_IF_ERROR(CheckAccess(dir, r.caller(), kW | kX));
  const bool moving_dir = r.type() == v1::FT_DIRECTORY;
  v1::InsertEntryReply rep;
  RocksMetaStore::Batch b;
  Result<EntryValue> old = store_->GetEntry(r.parent(), r.name());
  bool replaced_file = false;
  bool same_file = false;
  if (old.ok()) {
    if (r.flags() & v1::RENAME_FLAG_NOREPLACE) return Exists("target exists");
    if (old->handle == r.handle()) {
      same_file = true;  // same file: nothing to change but the outcome record
    } else {
      const bool old_dir = old->type == v1::FT_DIRECTORY;
      if (moving_dir && !old_dir) return Status(Code::kNotDir, "target is not a directory");
      if (!moving_dir && old_dir) return Status(Code::kIsDir, "target is a directory");
      CLF_RETURN_IF_ERROR(CheckStickyOf(dir, old->handle, r.caller()));
      if (old_dir) {
        CLF_RETURN_IF_ERROR(RemoveDirAnywhere(old->handle));
      } else {
        replaced_file = true;
      }
      rep.set_replaced_handle(old->handle);
    }
  } else if (old.status().code() != Code::kNotFound) {
    return old.status();
  } else if (moving_dir) {
    dir.set_nlink(dir.nlink() + 1);
  }
  if (same_file) {
    rep.set_same_file(true);
    if (id == 0) return rep;
  } else {
    b.PutEntry(r.parent(), r.name(), EntryValue{r.handle(), r.type()});
    *dir.mutable_mtime() = *dir.mutable_ctime() = Now();
    b.PutAttr(dir);
  }
  // The replaced file's link: in this batch when its metadata is here, else
  // recorded here and applied (at most once) after the commit.
  std::unique_lock<std::mutex> inode_l;
  v1::AdjustLinkReply local_adj;
  bool local_drop = false, remote_drop = false;
  v1::PendingLinkDrop drop;
  if (replaced_file) {
    drop.set_handle(rep.replaced_handle());
    drop.set_keep_orphan(r.keep_orphan());
    if (ServerOf(rep.replaced_handle()) == self_) {
      inode_l = std::unique_lock<std::mutex>(InodeLock(rep.replaced_handle()));
      Result<v1::AdjustLinkReply> adj =
          AdjustLinkInBatch(rep.replaced_handle(), -1, r.keep_orphan(), &b);
      if (adj.ok()) {
        local_adj = *adj;
        local_drop = true;
        rep.set_orphaned(adj->orphaned());
      } else if (adj.status().code() != Code::kStale) {
        return adj.status();
      }
    } else if (id != 0) {
      b.PutLinkDrop(id, drop.SerializeAsString());
      remote_drop = true;
    }
  }
  if (id != 0) {
    v1::RenameOutcome o;
    o.set_applied(true);
    *o.mutable_reply() = rep;
    b.PutRenameOutcome(id, o.SerializeAsString());
  }
  if (id != 0) MaybeDie("insert_before_commit");
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  if (id != 0) MaybeDie("insert_after_commit");  // before the link drop and the answer
  if (local_drop) AfterLinkCommit(local_adj);
  if (inode_l.owns_lock()) inode_l.unlock();
  if (il.owns_lock()) il.unlock();
  dl.unlock();
  if (remote_drop) {
    Result<v1::AdjustLinkReply> adj = ApplyLinkDrop(id, drop);
    if (adj.ok()) {
      rep.set_orphaned(adj->orphaned());
    } else {
      CLF_LOG_WARN("rename: link drop of replaced {:x} pending: {}", drop.handle(),
                   adj.status().ToString());
    }
  } else if (replaced_file && !local_drop && id == 0) {
    Result<v1::AdjustLinkReply> adj = AdjustLinkAnywhere(rep.replaced_handle(), -1, r.keep_orphan());
    if (adj.ok()) rep.set_orphaned(adj->orphaned());
  }
  return rep;
}

Result<v1::ResolveRenameReply> MetaOps::PeerResolveRename(uint64_t id) {
  std::lock_guard<std::mutex> il(IntentLock(id));
  v1::ResolveRenameReply rep;
  Result<std::string> prior = store_->GetRenameOutcome(id);
  if (prior.ok()) {
    v1::RenameOutcome o;
    if (!o.ParseFromString(*prior)) return Internal("corrupt rename outcome record");
    rep.set_applied(o.applied());
    if (o.applied()) *rep.mutable_reply() = o.reply();
    return rep;
  }
  if (prior.status().code() != Code::kNotFound) return prior.status();
  if (id < store_->RenameWatermark(ServerOf(id))) {
    // Its source said it is settled and will never ask: the record is gone,
    // the outcome cannot be told (and must not be guessed).
    return Internal("rename intent " + std::to_string(id) + " was settled and forgotten");
  }
  v1::RenameOutcome o;
  o.set_applied(false);
  RocksMetaStore::Batch b;
  b.PutRenameOutcome(id, o.SerializeAsString());
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  rep.set_applied(false);
  return rep;
}

Result<uint32_t> MetaOps::PeerForgetRenames(uint64_t settled_below) {
  const ServerId source = ServerOf(settled_below);
  std::lock_guard<std::mutex> l(forget_mu_);
  if (settled_below <= store_->RenameWatermark(source)) return 0u;
  std::vector<uint64_t> ids = store_->RenameOutcomeIds(source, settled_below);
  RocksMetaStore::Batch b;
  for (uint64_t id : ids) b.DeleteRenameOutcome(id);
  b.PutRenameWatermark(source, settled_below);
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  return static_cast<uint32_t>(ids.size());
}

size_t MetaOps::rename_intent_count() {
  std::lock_guard<std::mutex> l(intents_mu_);
  return pending_intents_.size();
}

size_t MetaOps::rename_outcome_count() const { return store_->RenameOutcomeCount(); }

Result<v1::AdjustLinkReply> MetaOps::ApplyLinkDrop(uint64_t id, const v1::PendingLinkDrop& d) {
  v1::AdjustLinkRequest q;
  q.set_handle(d.handle());
  q.set_delta(-1);
  q.set_keep_orphan(d.keep_orphan());
  q.set_op_id(id);
  Result<v1::AdjustLinkReply> adj = peers_->AdjustLink(ServerOf(d.handle()), q);
  // Stale: the file is gone already (nothing left to drop).
  if (adj.ok() || adj.status().code() == Code::kStale) {
    RocksMetaStore::Batch b;
    b.DeleteLinkDrop(id);
    CLF_RETURN_IF_ERROR(store_->Commit(b));
  }
  return adj;
}

Result<v1::AdjustLinkReply> MetaOps::AdjustLinkOnce(const v1::AdjustLinkRequest& r) {
  std::lock_guard<std::mutex> l(InodeLock(r.handle()));
  CLF_ASSIGN_OR_RETURN(bool done, store_->HasAppliedOp(r.op_id()));
  if (done) {
    v1::AdjustLinkReply rep;
    Result<v1::Attr> a = store_->GetAttr(r.handle());
    if (a.ok()) *rep.mutable_attr() = *a;
    return rep;
  }
  RocksMetaStore::Batch b;
  CLF_ASSIGN_OR_RETURN(v1::AdjustLinkReply rep,
                       AdjustLinkInBatch(r.handle(), r.delta(), r.keep_orphan(), &b));
  b.PutAppliedOp(r.op_id());
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  AfterLinkCommit(rep);
  return rep;
}

// ---------------------------------------------------------------- background

Status MetaOps::SettleOne(uint64_t id) {
  v1::RenameIntent in;
  auto state = [&]() -> Status {
    std::lock_guard<std::mutex> l(intents_mu_);
    auto it = pending_intents_.find(id);
    if (it == pending_intents_.end()) return Status(Code::kStale, "rename intent is not pending");
    if (in_flight_.count(id) != 0) return Status(Code::kBusy, "its Rename call is still running");
    in = it->second;
    return Status::Ok();
  };
  CLF_RETURN_IF_ERROR(state());
  // Asked without the source directory's lock (D may be down for long; the
  // directory stays usable): D's answer is final, applied under the lock.
  CLF_ASSIGN_OR_RETURN(v1::ResolveRenameReply r, AskOutcome(in));
  DirGuard dl(DirLock(in.src_parent()));
  CLF_RETURN_IF_ERROR(state());  // settled meanwhile?
  CLF_RETURN_IF_ERROR(ApplyOutcome(in, r));
  CLF_LOG_INFO("rename intent {:x} ({} -> {:x}/{}) settled: {}", in.id(), in.src_name(),
               in.dst_parent(), in.dst_name(), r.applied() ? "completed" : "rolled back");
  return Status::Ok();
}

std::vector<std::pair<v1::RenameIntent, bool>> MetaOps::PendingRenames() {
  std::vector<std::pair<v1::RenameIntent, bool>> out;
  std::lock_guard<std::mutex> l(intents_mu_);
  for (const auto& [id, in] : pending_intents_) out.emplace_back(in, in_flight_.count(id) != 0);
  return out;
}

Status MetaOps::SettleRename(uint64_t id) {
  if (ServerOf(id) == self_) return SettleOne(id);
  for (auto& [drop_id, value] : store_->LinkDrops()) {
    if (drop_id != id) continue;
    v1::PendingLinkDrop d;
    if (!d.ParseFromString(value)) return Internal("corrupt pending link drop record");
    Result<v1::AdjustLinkReply> adj = ApplyLinkDrop(id, d);
    if (!adj.ok() && adj.status().code() != Code::kStale) return adj.status();
    return Status::Ok();
  }
  return Status(Code::kStale, "no pending link drop with this id");
}

void MetaOps::ForgetSettled() {
  uint64_t below = 0;
  std::vector<ServerId> to;
  {
    std::lock_guard<std::mutex> l(intents_mu_);
    below = MakeHandle(self_, next_intent_);
    for (const auto& [id, in] : pending_intents_) {
      if (ServerOf(id) == self_) below = std::min(below, id);
    }
    if (!in_flight_.empty()) below = std::min(below, *in_flight_.begin());
    for (const auto& [d, max] : sent_max_) {
      const uint64_t told = forget_sent_[d];
      if (max != 0 && below > told && max >= told) to.push_back(d);
    }
  }
  for (ServerId d : to) {
    v1::ForgetRenamesRequest q;
    q.set_settled_below(below);
    Result<v1::ForgetRenamesReply> rep = peers_->ForgetRenames(d, q);
    if (!rep.ok()) continue;  // retried at the next pass
    std::lock_guard<std::mutex> l(intents_mu_);
    forget_sent_[d] = std::max(forget_sent_[d], below);
  }
}

size_t MetaOps::SettleRenameIntents() {
  std::vector<uint64_t> todo;
  {
    std::lock_guard<std::mutex> l(intents_mu_);
    for (const auto& [id, in] : pending_intents_) {
      if (in_flight_.count(id) == 0) todo.push_back(id);
    }
  }
  // Test-only: leave settling to fsck --repair and to the operations that need it.
  if (FaultAt("no_background_settle")) return todo.size();
  size_t left = 0;
  for (uint64_t id : todo) {
    Status s = SettleOne(id);
    if (!s.ok() && s.code() != Code::kStale && s.code() != Code::kBusy) ++left;
  }
  for (auto& [id, value] : store_->LinkDrops()) {
    v1::PendingLinkDrop d;
    if (!d.ParseFromString(value)) {
      CLF_LOG_ERROR("corrupt pending link drop record {:x}", id);
      continue;
    }
    Result<v1::AdjustLinkReply> adj = ApplyLinkDrop(id, d);
    if (!adj.ok() && adj.status().code() != Code::kStale) ++left;
  }
  ForgetSettled();
  return left;
}

void MetaOps::RunRenameIntents() {
  std::unique_lock<std::mutex> l(intents_mu_);
  while (!intents_stop_) {
    l.unlock();
    SettleRenameIntents();
    l.lock();
    intents_cv_.wait_for(l, std::chrono::milliseconds(kIntentRetryMs),
                         [this] { return intents_stop_; });
  }
}

void MetaOps::StopRenameIntents() {
  {
    std::lock_guard<std::mutex> l(intents_mu_);
    intents_stop_ = true;
  }
  intents_cv_.notify_all();
}

}  // namespace clf::server
