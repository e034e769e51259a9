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
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "common/log.h"
#include "common/test_fault.h"
#include "server/ops/meta_ops.h"
#include "server/ops/ops_internal.h"
#include "server/ops/permissions.h"

namespace clf::server {
namespace {

constexpr int kInsertSlowMs = 200;       // CLF_TEST_FAULT=insert_slow

// Test-only fault points (common/test_fault.h): the process dies there as
// from kill -9, to test the recovery of the records above.
void MaybeDie(const char* name) {
  if (!TestFault(name)) return;
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

Status MetaOps::CompleteIntent(const v1::RenameIntent& in, bool same_file) {
  // same_file: the destination name already named this file, so the rename
  // changes nothing (POSIX) and the source entry stays.
  if (same_file) return intents_.Drop(in.id());
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
  intents_.Dropped(in.id());
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
  if (res.applied()) return CompleteIntent(in, res.reply().same_file());
  return intents_.Drop(in.id());
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
  RenameIntents::Matching m;
  for (;;) {
    m = intents_.Match(names_it);
    if (m.running.empty()) break;
    if (held.size() == 0) {
      return Status(Code::kBusy, "the name is the source of a rename in progress here");
    }
    // The running rename takes its source directory's lock to finish: wait without ours.
    for (DirGuard* g : held) g->unlock();
    const bool ended = intents_.WaitEnded(m.running, limit);
    Relock(held);
    if (!ended) return Status(Code::kBusy, "a rename of this name is still in progress");
  }
  // No new rename of these names starts while their directories' locks are held.
  for (const v1::RenameIntent& in : m.idle) {
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

Result<v1::RenameIntent> MetaOps::CheckRenameSource(const v1::RenameRequest& r, DirGuard* sl) {
  CLF_RETURN_IF_ERROR(SettlePendingFor({{r.src_parent(), r.src_name()}}, {sl}));
  CLF_ASSIGN_OR_RETURN(v1::Attr sdir, GetDir(r.src_parent()));
  CLF_RETURN_IF_ERROR(CheckAccess(sdir, r.caller(), kW | kX));
  CLF_ASSIGN_OR_RETURN(EntryValue e, store_->GetEntry(r.src_parent(), r.src_name()));
  CLF_RETURN_IF_ERROR(CheckStickyOf(sdir, e.handle, r.caller()));
  if (e.type == v1::FT_DIRECTORY && e.handle == r.dst_parent()) {
    return Invalid("cannot move a directory into itself");
  }
  v1::RenameIntent in;
  in.set_src_parent(r.src_parent());
  in.set_src_name(r.src_name());
  in.set_handle(e.handle);
  in.set_type(e.type);
  in.set_dst_parent(r.dst_parent());
  in.set_dst_name(r.dst_name());
  in.set_flags(r.flags());
  in.set_keep_orphan(r.keep_orphan());
  return in;
}

Result<v1::RenameReply> MetaOps::RenameAcrossOnce(const v1::RenameRequest& r, uint64_t session,
                                                  bool* busy) {
  DirGuard sl(DirLock(r.src_parent()));
  CLF_ASSIGN_OR_RETURN(v1::RenameIntent in, CheckRenameSource(r, &sl));
  // Until this call ends the background leaves the intent alone (asking D
  // now would abort an insert that is merely slow), and operations on the
  // source name wait for it (SettlePendingFor). Ended before `sl` is released.
  RenameIntents::InFlight in_flight = intents_.Begin();
  if (in_flight.id() == 0) return IoError("rename: cannot record an intent id");
  in.set_id(in_flight.id());
  CLF_RETURN_IF_ERROR(intents_.Record(in));
  // The intent holds the source name now; D is called without the source
  // directory's lock, so a rename D is running into this directory (an
  // opposite rename) is not waited on.
  sl.unlock();
  MaybeDie("rename_after_intent");
  v1::InsertEntryRequest ir;
  ir.set_parent(r.dst_parent());
  ir.set_name(r.dst_name());
  ir.set_handle(in.handle());
  ir.set_type(in.type());
  ir.set_flags(r.flags());
  ir.set_keep_orphan(r.keep_orphan());
  ir.set_intent_id(in.id());
  ir.set_session(session);
  *ir.mutable_caller() = r.caller();
  Result<v1::InsertEntryReply> irep = peers_->InsertEntry(ServerOf(r.dst_parent()), ir);
  if (irep.ok()) MaybeDie("rename_after_insert");
  CLF_ASSIGN_OR_RETURN(v1::InsertEntryReply applied, SettleOwnIntent(in, irep, &sl, busy));
  v1::RenameReply rep;
  rep.set_replaced_handle(applied.replaced_handle());
  rep.set_orphaned(applied.orphaned());
  return rep;
}

Result<v1::InsertEntryReply> MetaOps::SettleOwnIntent(const v1::RenameIntent& in,
                                                      const Result<v1::InsertEntryReply>& irep,
                                                      DirGuard* sl, bool* busy) {
  if (irep.ok()) {
    sl->lock();
    CLF_RETURN_IF_ERROR(CompleteIntent(in, irep->same_file()));
    return *irep;
  }
  // No answer, a refusal, or a deadline: D may still apply it. Ask (no lock
  // needed: D's answer is final); D fences X if not applied.
  Result<v1::ResolveRenameReply> res = AskOutcome(in);
  if (!res.ok()) {
    CLF_LOG_WARN("rename {} -> {:x}/{}: outcome unknown, settled in the background: {} / {}",
                 in.src_name(), in.dst_parent(), in.dst_name(), irep.status().ToString(),
                 res.status().ToString());
    return Status(Code::kUnavailable,
                  "rename across servers: destination did not answer (the rename is settled "
                  "when it does): " + irep.status().ToString());
  }
  sl->lock();
  CLF_RETURN_IF_ERROR(ApplyOutcome(in, *res));
  if (res->applied()) return res->reply();
  // Rolled back. A refusal keeps its own error (kBusy: the caller may try
  // again); no answer in time becomes kTimedOut, so the caller can tell
  // "not applied" from "not known yet" (kUnavailable).
  if (irep.status().code() == Code::kBusy) *busy = true;
  if (irep.status().code() != Code::kUnavailable) return irep.status();
  return Status(Code::kTimedOut, "rename across servers not applied: destination did not "
                                 "answer in time: " + irep.status().ToString());
}

// ---------------------------------------------------------------- destination side

Result<v1::InsertEntryReply> MetaOps::PeerInsertEntry(const v1::InsertEntryRequest& r) {
  CLF_RETURN_IF_ERROR(ValidateName(r.name()));
  // Test-only: a slow destination, so a test can act while the rename is in flight.
  if (r.intent_id() != 0 && TestFault("insert_slow")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kInsertSlowMs));
  }
  DirGuard dl(DirLock(r.parent()));
  // The name may itself be the source of one of this server's unsettled
  // renames: settled first; one still running answers kBusy (no wait here).
  CLF_RETURN_IF_ERROR(SettlePendingFor({{r.parent(), r.name()}}, {}));
  const uint64_t id = r.intent_id();
  std::unique_lock<std::mutex> il;
  if (id != 0) {
    il = std::unique_lock<std::mutex>(intents_.Lock(id));
    CLF_ASSIGN_OR_RETURN(std::optional<v1::InsertEntryReply> prior, intents_.PriorOutcome(id));
    if (prior) return *prior;
  }
  CLF_ASSIGN_OR_RETURN(v1::Attr dir, GetDir(r.parent()));
  CLF_RETURN_IF_ERROR(CheckAccess(dir, r.caller(), kW | kX));
  v1::InsertEntryReply rep;
  RocksMetaStore::Batch b;
  CLF_ASSIGN_OR_RETURN(bool replaced_file, PlaceInsertedEntry(r, &dir, &rep, &b));
  if (rep.same_file() && id == 0) return rep;
  // The replaced file's link: in this batch when its metadata is here, else
  // recorded here and applied (at most once) after the commit.
  std::unique_lock<std::mutex> inode_l;
  std::optional<v1::AdjustLinkReply> local_adj;
  bool remote_drop = false;
  v1::PendingLinkDrop drop;
  drop.set_handle(rep.replaced_handle());
  drop.set_keep_orphan(r.keep_orphan());
  if (replaced_file && ServerOf(rep.replaced_handle()) == self_) {
    inode_l = std::unique_lock<std::mutex>(InodeLock(rep.replaced_handle()));
    Result<v1::AdjustLinkReply> adj =
        AdjustLinkInBatch(rep.replaced_handle(), -1, r.keep_orphan(), &b);
    if (adj.ok()) {
      local_adj = *adj;
      rep.set_orphaned(adj->orphaned());
    } else if (adj.status().code() != Code::kStale) {
      return adj.status();
    }
  } else if (replaced_file && id != 0) {
    b.PutLinkDrop(id, drop.SerializeAsString());
    remote_drop = true;
  }
  if (id != 0) {
    RenameIntents::PutApplied(id, rep, &b);
    MaybeDie("insert_before_commit");
  }
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  if (id != 0) MaybeDie("insert_after_commit");  // before the link drop and the answer
  if (local_adj) AfterLinkCommit(*local_adj);
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
  } else if (replaced_file && !local_adj && id == 0) {
    Result<v1::AdjustLinkReply> adj = AdjustLinkAnywhere(rep.replaced_handle(), -1, r.keep_orphan());
    if (adj.ok()) rep.set_orphaned(adj->orphaned());
  }
  return rep;
}

Result<bool> MetaOps::PlaceInsertedEntry(const v1::InsertEntryRequest& r, v1::Attr* dir,
                                         v1::InsertEntryReply* rep, RocksMetaStore::Batch* b) {
  const bool moving_dir = r.type() == v1::FT_DIRECTORY;
  bool replaced_file = false;
  Result<EntryValue> old = store_->GetEntry(r.parent(), r.name());
  if (old.ok()) {
    if (r.flags() & v1::RENAME_FLAG_NOREPLACE) return Exists("target exists");
    if (old->handle == r.handle()) {
      rep->set_same_file(true);  // same file: nothing to change but the outcome record
      return false;
    }
    CLF_ASSIGN_OR_RETURN(const bool old_dir, ReplaceTarget(moving_dir, *old, *dir, r.caller()));
    replaced_file = !old_dir;
    rep->set_replaced_handle(old->handle);
  } else if (old.status().code() != Code::kNotFound) {
    return old.status();
  } else if (moving_dir) {
    dir->set_nlink(dir->nlink() + 1);
  }
  b->PutEntry(r.parent(), r.name(), EntryValue{r.handle(), r.type()});
  *dir->mutable_mtime() = *dir->mutable_ctime() = Now();
  b->PutAttr(*dir);
  return replaced_file;
}

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
  CLF_ASSIGN_OR_RETURN(v1::RenameIntent in, intents_.Idle(id));
  // Asked without the source directory's lock (D may be down for long; the
  // directory stays usable): D's answer is final, applied under the lock.
  CLF_ASSIGN_OR_RETURN(v1::ResolveRenameReply r, AskOutcome(in));
  DirGuard dl(DirLock(in.src_parent()));
  CLF_RETURN_IF_ERROR(intents_.Idle(id).status());  // settled meanwhile?
  CLF_RETURN_IF_ERROR(ApplyOutcome(in, r));
  CLF_LOG_INFO("rename intent {:x} ({} -> {:x}/{}) settled: {}", in.id(), in.src_name(),
               in.dst_parent(), in.dst_name(), r.applied() ? "completed" : "rolled back");
  return Status::Ok();
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

size_t MetaOps::SettleRenameIntents() {
  std::vector<uint64_t> todo = intents_.IdleIds();
  // Test-only: leave settling to fsck --repair and to the operations that need it.
  if (TestFault("no_background_settle")) return todo.size();
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
  intents_.TellSettled();
  return left;
}

}  // namespace clf::server
