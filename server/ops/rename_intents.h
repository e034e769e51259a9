// RenameIntents: the records of the cross-server rename protocol, on both
// sides (the protocol's steps, which change directory entries, are MetaOps's:
// rename_intent.cc; its invariants are written there).
//  - Source side: the pending intents ('R' records), the id high-water mark
//    ('Q') and which intents still have a Rename call running ("in flight");
//    what each destination was told is settled (Peer.ForgetRenames).
//  - Destination side: the outcome of each intent ('P', applied or aborted)
//    and, per source server, the watermark below which every intent is
//    settled ('W').
// Takes no directory lock and never waits for another server while holding
// its mutex. Lock order: a caller's DirLocks, then IntentLock(id), then the
// table's own mutexes (leaves).
// Thread safety: thread safe; Run blocks until Stop.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "clf/v1/peer.pb.h"
#include "common/handle.h"
#include "common/status.h"
#include "server/ops/peers.h"
#include "server/store/meta_store.h"

namespace clf::server {

class RenameIntents {
 public:
  RenameIntents(ServerId self, uint32_t servers, RocksMetaStore* store, Peers* peers)
      : self_(self), servers_(servers), store_(store), peers_(peers) {}

  // At start: the pending intents and the id high-water mark.
  Status Load();

  // ------------------------------------------------------------ source side

  // A new intent id, counted in flight until the guard is destroyed, so
  // ForgetRenames never covers it and no one else settles it meanwhile.
  // id() is 0 when no id could be recorded.
  class InFlight {
   public:
    InFlight(RenameIntents* t, uint64_t id) : t_(t), id_(id) {}
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;
    ~InFlight() {
      if (id_ != 0) t_->EndInFlight(id_);
    }
    uint64_t id() const { return id_; }

   private:
    RenameIntents* t_;
    uint64_t id_;
  };
  InFlight Begin() { return InFlight(this, NewId()); }

  // Commits `in`'s 'R' record and counts it pending (sent to its destination).
  Status Record(const v1::RenameIntent& in);
  // Deletes intent `id`'s record (alone).
  Status Drop(uint64_t id);
  // The caller committed the record's deletion in a batch of its own.
  void Dropped(uint64_t id);

  bool HasPendingFor(Handle parent, const std::string& name);
  // The pending intents `match` selects: those whose Rename call still runs,
  // and the others.
  struct Matching {
    std::vector<uint64_t> running;
    std::vector<v1::RenameIntent> idle;
  };
  Matching Match(const std::function<bool(const v1::RenameIntent&)>& match);
  // Waits until none of `ids` is in flight; false at `limit`.
  bool WaitEnded(const std::vector<uint64_t>& ids, std::chrono::steady_clock::time_point limit);
  // Intent `id` if it is pending and its Rename call has ended; kStale if it
  // is not pending, kBusy while its call runs.
  Result<v1::RenameIntent> Idle(uint64_t id);
  // The ids of the pending intents whose call has ended.
  std::vector<uint64_t> IdleIds();
  // Every pending intent, each with whether its Rename call still runs.
  std::vector<std::pair<v1::RenameIntent, bool>> Pending();
  size_t pending_count();
  // Peer.ForgetRenames to the destinations that may keep outcome records of
  // this server's settled intents (failures are retried at the next call).
  void TellSettled();

  // ------------------------------------------------------------ destination side

  // Serializes the outcome of one intent.
  std::mutex& Lock(uint64_t id) { return locks_[id % locks_.size()]; }
  // Under Lock(id): the outcome already recorded for intent `id`. nullopt:
  // none (it may be applied now); the applied reply when it was; kCancelled
  // when it was aborted or is settled at its source.
  Result<std::optional<v1::InsertEntryReply>> PriorOutcome(uint64_t id);
  // The "applied" outcome of `id`, committed with the entry in `b`.
  static void PutApplied(uint64_t id, const v1::InsertEntryReply& rep, RocksMetaStore::Batch* b);
  // Peer.ResolveRename: the outcome of `id`, recording "aborted" if none was.
  Result<v1::ResolveRenameReply> Resolve(uint64_t id);
  // Peer.ForgetRenames: every intent of ServerOf(settled_below) below it is
  // settled; deletes their outcome records. Returns how many were deleted.
  Result<uint32_t> ForgetBelow(uint64_t settled_below);
  size_t outcome_count() const { return store_->RenameOutcomeCount(); }

  // ------------------------------------------------------------ background

  // Calls `pass` every kRetryMs until Stop(); call on a dedicated thread.
  void Run(const std::function<void()>& pass);
  void Stop();
  static constexpr int kRetryMs = 500;

 private:
  uint64_t NewId();
  void EndInFlight(uint64_t id);

  const ServerId self_;
  const uint32_t servers_;
  RocksMetaStore* const store_;
  Peers* const peers_;

  std::mutex mu_;  // guards the members below
  std::map<uint64_t, v1::RenameIntent> pending_;  // 'R' records, by id
  std::set<uint64_t> in_flight_;                  // intents whose Rename call has not returned
  std::condition_variable ended_cv_;              // an id left in_flight_
  uint64_t next_ = 0;                             // next intent counter
  uint64_t limit_ = 0;  // persisted high-water mark ('Q'): ids below it may be used
  // Per destination server: the settled_below it was last told, and the
  // highest intent id sent to it (at start: every id below next_).
  std::map<ServerId, uint64_t> told_, sent_max_;
  std::condition_variable stop_cv_;
  bool stop_ = false;

  std::array<std::mutex, 1024> locks_;
  std::mutex forget_mu_;  // destination side: serializes the 'W' watermark updates
};

}  // namespace clf::server
