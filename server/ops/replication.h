// Replication: this server's part in keeping the copies of a replicated
// file's objects identical (docs/ARCHITECTURE.md "Replicated data").
//
// - One order per object: the copy that orders an object's writes is the
//   first copy (lowest slot) its file's metadata server (M) does not have as
//   stale, the acting primary. A client sends a write to the copy it takes
//   for that; OrderedWrite writes it here, then forwards it to every other
//   copy, one write per overlapping range of an object at a time, so every
//   copy applies overlapping writes in the same order. A copy that does not
//   take a forwarded write is marked stale on M before the write is
//   acknowledged. A write sent to a later copy while an earlier one is
//   current is passed on to that earlier copy; if it does not answer, it is
//   marked stale and this copy orders.
// - A copy serves reads, and takes forwarded writes, only as M's state says
//   (CheckCurrent, CheckForwarded); a copy refuses only after asking M again.
// - M's state is cached per file; M tells the holders of a file's copies
//   when it changes (Changed: the entry is dropped). A restart starts with
//   nothing cached, and a pause of this process longer than kFreezeMs
//   (SIGSTOP, a stalled VM) drops everything, since M may have marked a copy
//   stale meanwhile without reaching this server.
// Thread safety: thread safe. Calls block on M and on the other copies'
// servers (each for at most the cluster's rpc_timeout_ms).
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "clf/v1/peer.pb.h"
#include "common/config.h"
#include "common/extent.h"
#include "common/layout.h"
#include "common/object_ref.h"
#include "common/status.h"
#include "common/transport/tcp_transport.h"
#include "server/data/copy_stores.h"
#include "server/ops/write_intents.h"

namespace clf::server {

class Replication {
 public:
  // Asks a file's metadata server `m` about its copies (Peer.Replicas, or
  // this server's own ReplicaStateOps when m is this server).
  using AskM = std::function<Result<v1::ReplicasReply>(ServerId m, const v1::ReplicasRequest&)>;
  // auth: how this server authenticates on the other servers' data channels.
  Replication(const ClusterConfig& cluster, ServerId self, CopyStores* stores, AskM ask_m,
              transport::DataChannelAuth auth);
  ~Replication();
  Replication(const Replication&) = delete;
  Replication& operator=(const Replication&) = delete;

  // A client's write to the copy obj names (not forwarded), as above.
  // kNotCurrent: this copy is stale (the client tries the next one).
  Status OrderedWrite(const ObjectRef& obj, const std::vector<Extent>& extents,
                      std::string_view payload, bool sync);
  // A client's sync through the copy obj names: every copy of the units
  // synced, by the copy that orders them (as OrderedWrite; a copy that fails
  // the sync is marked stale).
  Status OrderedSync(const ObjectRef& obj);
  // A forwarded write may be applied to this copy: its orderer is the acting primary.
  Status CheckForwarded(const ObjectRef& obj);
  // This copy may serve a read: M does not have it stale.
  Status CheckCurrent(const ObjectRef& obj);
  // M changed h's replica state, or some copy of it is stale
  // (Peer.ReplicasChanged): the cached view is dropped and `on_changed` (the
  // resync's queue) hears of h.
  void Changed(Handle h);
  void set_on_changed(std::function<void(Handle)> f) { on_changed_ = std::move(f); }
  // A server that started with an empty store: its copies of the files of
  // every other metadata server may be gone. Until LostToldTo(m) (m recorded
  // them stale, Peer.AnnounceStore), no copy here of a file of m serves or
  // orders. Call before serving.
  void SetLostCopies();
  void LostToldTo(ServerId m);

  // Power loss (server/ops/write_intents.h). `intents` records every write
  // to a copy here before it is made (BeginWrite); the copies it found at
  // start may have lost writes, so none of them serves or orders until its
  // metadata server has it stale (or keeps it as the last current copy).
  // Call before serving.
  void SetWriteIntents(WriteIntents* intents);
  // Before a write or truncate of a copy here (forwarded, or ordered here):
  // null when nothing is recorded (no intents set).
  Result<std::unique_ptr<WriteIntents::Writing>> BeginWrite(Handle h, uint32_t slot);
  // Asks the metadata servers to record every such copy stale; true once
  // none is left (call again later while false).
  bool SettleUnsynced();

  // Resync (server/ops/resync.h drives it). One stale copy this server
  // brings current: the units of `primary`, from this server's copy in
  // slot `from` (their acting primary) to the copy in slot `to`.
  struct CopyWork {
    Handle handle = 0;
    Layout layout;
    ServerId primary = 0;
    uint32_t from = 0, to = 0;
  };
  // The stale copies of h whose acting primary is on this server (asks M).
  Result<std::vector<CopyWork>> ResyncWork(Handle h);
  // Copies [off, off + len) of the copy onto the stale one, in order with
  // the object's writes (under its order gate); returns the bytes copied
  // (0 past this copy's end).
  Result<uint64_t> CopyRange(const CopyWork& w, uint64_t off, uint64_t len);
  // Ends a resync with no write in between (the whole object's gate): the
  // bytes past `copied` (the object may have grown), the copy cut to this
  // copy's size and synced, then marked current on M. Returns the bytes
  // copied here.
  Result<uint64_t> FinishCopy(const CopyWork& w, uint64_t copied);

  static constexpr int kFreezeMs = 1000;
  // A write passed on to the copy that orders it and refused there
  // (kNotCurrent) is looked at again with M's state this many times.
  static constexpr int kPassOnRetries = 3;
  static constexpr size_t kMaxCached = 1 << 16;
  // Counters (tests, metrics): writes forwarded to another copy, copies marked stale.
  uint64_t forwarded() const { return forwarded_.load(std::memory_order_relaxed); }
  // Reads served from a copy in slot 1 or later (a client's read_sched chose it).
  void CountCopyRead() { copy_reads_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t copy_reads() const { return copy_reads_.load(std::memory_order_relaxed); }
  uint64_t marked_stale() const { return marked_stale_.load(std::memory_order_relaxed); }

 private:
  struct View {
    Layout layout;
    std::vector<std::pair<ServerId, uint32_t>> stale;  // (primary, slot)
    bool Stale(ServerId primary, uint32_t slot) const;
    // The acting primary's slot of `primary`'s units: the first copy not
    // stale (layout.replicas when every copy is stale).
    uint32_t Orderer(ServerId primary) const;
  };
  // h's view, cached unless `fresh` (then asked of M and cached).
  Result<View> ViewOf(Handle h, bool fresh);
  // Checks obj against the view: a replicated regular file whose copy in
  // obj.slot is on this server; returns the copy's primary.
  Result<ServerId> PrimaryOf(const ObjectRef& obj, const View& v) const;
  Result<v1::ReplicasReply> Ask(Handle h, v1::ReplicasOp op, ServerId primary, uint32_t slot);
  Result<transport::TcpTransport*> PeerPath(ServerId s);
  // A write (or with sync_only, a sync) a client sent to a copy.
  struct Request {
    const std::vector<Extent>& extents;
    std::string_view payload;
    bool sync = false;
    bool sync_only = false;
  };
  Status Ordered(const ObjectRef& obj, const Request& q);
  // Resync: [off, off + len) of the copy in `from` (w.from's store) sent to
  // the stale copy w.to, as a write its acting primary forwards.
  Status SendRange(ObjectStore* from, const CopyWork& w, uint64_t off, uint64_t len);
  // Sends q to the copy `to` holds as `obj`.
  Status Send(ServerId to, const ObjectRef& obj, const Request& q);
  // The request ordered here: local, then every other copy.
  Status ApplyAndForward(const ObjectRef& obj, ServerId primary, const Request& q);
  void Tick();  // the freeze detector's thread

  // One object's writes in flight at its orderer: a write waits while one
  // overlapping its span [lo, hi) runs.
  class OrderGate {
   public:
    // A span entered; destroying it leaves.
    class Held {
     public:
      Held(OrderGate* g, Handle h, ServerId p, uint64_t lo, uint64_t hi)
          : g_(g), h_(h), p_(p), lo_(lo), hi_(hi) {}
      ~Held() { g_->Leave(h_, p_, lo_, hi_); }
      Held(const Held&) = delete;
      Held& operator=(const Held&) = delete;

     private:
      OrderGate* g_;
      Handle h_;
      ServerId p_;
      uint64_t lo_, hi_;
    };
    // Waits until no span of h's units overlapping [lo, hi) is held.
    [[nodiscard]] std::unique_ptr<Held> Enter(Handle h, ServerId primary, uint64_t lo,
                                              uint64_t hi);

   private:
    void Leave(Handle h, ServerId primary, uint64_t lo, uint64_t hi);
    std::mutex mu_;
    std::condition_variable cv_;
    std::map<std::pair<Handle, ServerId>, std::vector<std::pair<uint64_t, uint64_t>>> running_;
  };

  const ClusterConfig cluster_;
  const ServerId self_;
  CopyStores* const stores_;
  const AskM ask_m_;
  const transport::DataChannelAuth auth_;
  OrderGate order_;

  std::mutex mu_;  // guards views_, changes_, paths_
  std::unordered_map<Handle, View> views_;
  uint64_t changes_ = 0;  // Changed calls and cache drops: a view asked before one is not cached
  std::vector<std::unique_ptr<transport::TcpTransport>> paths_;

  std::atomic<int64_t> last_tick_ms_;
  std::atomic<bool> stop_{false};
  std::mutex tick_mu_;
  std::condition_variable tick_cv_;
  std::thread ticker_;
  std::atomic<uint64_t> forwarded_{0}, marked_stale_{0}, copy_reads_{0};
  // Copies of the files of these metadata servers may be gone (SetLostCopies).
  bool LostFor(Handle h);
  std::atomic<bool> any_lost_{false};
  // A copy found with a write record at start: recorded stale on M now if it
  // is still waiting; NotCurrent if M could not be asked.
  Status Settle(Handle h, uint32_t slot);
  WriteIntents* intents_ = nullptr;  // set before serving
  std::atomic<bool> any_unsynced_{false};
  std::set<std::pair<Handle, uint32_t>> unsynced_;  // guarded by mu_
  std::vector<bool> lost_from_;  // guarded by mu_
  std::function<void(Handle)> on_changed_;  // set before serving
};

}  // namespace clf::server
