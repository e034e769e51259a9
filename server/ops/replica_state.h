// ReplicaStateOps: a metadata server's (M's) record of which copies of its
// replicated files are stale (docs/ARCHITECTURE.md "Replicated data"). M is
// the authority on replica state, as the MooseFS master is on chunk
// versions: a data server that could not forward a write to a copy marks it
// stale here before it acknowledges the write, and a finished resync marks
// it current again. The record is the file's attributes' stale_replicas,
// made durable (WAL synced) before the answer. After a change every server
// holding a copy of the file is told (Peer.ReplicasChanged; this server's
// own Replication directly), within a quarter of the RPC timeout each.
// Thread safety: thread safe (the file's inode lock serializes changes).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>

#include "clf/v1/peer.pb.h"
#include "common/config.h"
#include "common/status.h"
#include "server/ops/dir_locks.h"
#include "server/store/meta_store.h"

namespace clf::server {

class ReplicaStateOps {
 public:
  // Tells server `to` that h's replica state changed; `done` runs once.
  using Tell = std::function<void(ServerId to, Handle h, std::function<void(Status)> done)>;
  ReplicaStateOps(const ClusterConfig& cluster, ServerId self, RocksMetaStore* store,
                  DirLocks* locks, Tell tell)
      : cluster_(cluster), self_(self), store_(store), locks_(locks), tell_(std::move(tell)) {}

  // Peer.Replicas: GET answers the layout and stale copies; MARK_STALE adds
  // a copy (kUnavailable if it is the last current copy of its units: that
  // one keeps serving); MARK_CURRENT removes one.
  Result<v1::ReplicasReply> Serve(const v1::ReplicasRequest& r);
  // Tells every server holding a copy of h (as `layout` places them) that
  // its replica state changed; returns when all answered or a quarter of the
  // RPC timeout passed.
  void TellHolders(Handle h, const v1::Layout& layout);

  // Peer.AnnounceStore: server `server` started, its data store new
  // (`fresh`) or not. The first announcement of a server is recorded (a
  // new cluster's, or a new server's, store holds nothing yet); a fresh
  // store of a server seen before is a lost disk: every copy it should hold
  // of the replicated files here is recorded stale (one that is its units'
  // last current copy cannot be: that is logged as lost). Returns how many
  // were recorded.
  Result<uint64_t> AnnounceStore(ServerId server, bool fresh);

  // The resync's reminder: until StopNudges(), every kNudgeMs each file here
  // with stale copies is announced (ReplicasChanged) to the servers holding
  // their acting primaries, which resync them; files whose copies are all
  // current leave the work list. Run on a dedicated thread.
  void RunNudges();
  void StopNudges();
  static constexpr int kNudgeMs = 2000;
  // Stale copies of the files here at the last pass (Admin.Status, metrics).
  uint64_t stale_copies() const { return stale_copies_.load(std::memory_order_relaxed); }
  // One pass (tests): returns the stale copies found.
  uint64_t NudgeOnce();

 private:
  Result<uint64_t> MarkLostCopies(ServerId lost);

  const ClusterConfig& cluster_;
  const ServerId self_;
  RocksMetaStore* const store_;
  DirLocks* const locks_;
  const Tell tell_;
  std::atomic<uint64_t> stale_copies_{0};
  std::mutex nudge_mu_;  // guards stop_
  std::condition_variable nudge_cv_;
  bool stop_ = false;
};

}  // namespace clf::server
