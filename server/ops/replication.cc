#include "server/ops/replication.h"

#include <algorithm>

#include "common/layout_proto.h"
#include "common/log.h"

namespace clf::server {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A copy that did not take a request because it or the way to it failed
// (not because it refused it).
bool Unreachable(const Status& st) {
  return st.code() == Code::kUnavailable || st.code() == Code::kTimedOut || st.code() == Code::kIo;
}

Status NotCurrent(std::string why) { return Status(Code::kNotCurrent, std::move(why)); }

}  // namespace

bool Replication::View::Stale(ServerId primary, uint32_t slot) const {
  return std::find(stale.begin(), stale.end(), std::make_pair(primary, slot)) != stale.end();
}

uint32_t Replication::View::Orderer(ServerId primary) const {
  uint32_t i = 0;
  while (i < layout.replicas && Stale(primary, i)) ++i;
  return i;
}

std::unique_ptr<Replication::OrderGate::Held> Replication::OrderGate::Enter(Handle h,
                                                                          ServerId primary,
                                                                          uint64_t lo,
                                                                          uint64_t hi) {
  std::unique_lock<std::mutex> l(mu_);
  const auto key = std::make_pair(h, primary);
  // Looked up afresh on every wake: Leave erases an object's entry when its
  // last span leaves.
  cv_.wait(l, [&] {
    auto it = running_.find(key);
    return it == running_.end() ||
           std::none_of(it->second.begin(), it->second.end(),
                        [&](const auto& s) { return s.first < hi && lo < s.second; });
  });
  running_[key].emplace_back(lo, hi);
  return std::make_unique<Held>(this, h, primary, lo, hi);
}

void Replication::OrderGate::Leave(Handle h, ServerId primary, uint64_t lo, uint64_t hi) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = running_.find({h, primary});
    if (it != running_.end()) {
      auto& spans = it->second;
      auto s = std::find(spans.begin(), spans.end(), std::make_pair(lo, hi));
      if (s != spans.end()) spans.erase(s);
      if (spans.empty()) running_.erase(it);
    }
  }
  cv_.notify_all();
}

Replication::Replication(const ClusterConfig& cluster, ServerId self, CopyStores* stores,
                         AskM ask_m, transport::DataChannelAuth auth)
    : cluster_(cluster),
      self_(self),
      stores_(stores),
      ask_m_(std::move(ask_m)),
      auth_(std::move(auth)),
      paths_(cluster.size()),
      last_tick_ms_(NowMs()) {
  ticker_ = std::thread([this] { Tick(); });
}

Replication::~Replication() {
  {
    std::lock_guard<std::mutex> l(tick_mu_);
    stop_ = true;
  }
  tick_cv_.notify_all();
  ticker_.join();
}

void Replication::Tick() {
  std::unique_lock<std::mutex> l(tick_mu_);
  while (!stop_) {
    tick_cv_.wait_for(l, std::chrono::milliseconds(100));
    const int64_t now = NowMs();
    if (now - last_tick_ms_.load() > kFreezeMs) {
      std::lock_guard<std::mutex> g(mu_);
      if (now - last_tick_ms_.load() > kFreezeMs) {
        CLF_LOG_WARN("replication: this process did not run for {} ms; asking the metadata "
                     "servers again about every replicated file",
                     now - last_tick_ms_.load());
        views_.clear();
        ++changes_;
      }
    }
    last_tick_ms_ = now;
  }
}

void Replication::Changed(Handle h) {
  {
    std::lock_guard<std::mutex> l(mu_);
    views_.erase(h);
    ++changes_;
  }
  if (on_changed_) on_changed_(h);
}

void Replication::SetLostCopies() {
  std::lock_guard<std::mutex> l(mu_);
  lost_from_.assign(cluster_.size(), true);
  lost_from_[self_] = false;  // this server's own metadata is new too
  any_lost_ = cluster_.size() > 1;
}

void Replication::LostToldTo(ServerId m) {
  std::lock_guard<std::mutex> l(mu_);
  if (m < lost_from_.size()) lost_from_[m] = false;
  any_lost_ = std::find(lost_from_.begin(), lost_from_.end(), true) != lost_from_.end();
}

bool Replication::LostFor(Handle h) {
  if (!any_lost_.load()) return false;
  std::lock_guard<std::mutex> l(mu_);
  return ServerOf(h) < lost_from_.size() && lost_from_[ServerOf(h)];
}

void Replication::SetWriteIntents(WriteIntents* intents) {
  std::lock_guard<std::mutex> l(mu_);
  intents_ = intents;
  unsynced_.insert(intents->leftover().begin(), intents->leftover().end());
  any_unsynced_ = !unsynced_.empty();
}

Result<std::unique_ptr<WriteIntents::Writing>> Replication::BeginWrite(Handle h, uint32_t slot) {
  if (intents_ == nullptr) return std::unique_ptr<WriteIntents::Writing>();
  return intents_->Begin(h, slot);
}

bool Replication::SettleUnsynced() {
  if (!any_unsynced_.load()) return true;
  std::vector<std::pair<Handle, uint32_t>> todo;
  {
    std::lock_guard<std::mutex> l(mu_);
    todo.assign(unsynced_.begin(), unsynced_.end());
  }
  for (const auto& [h, slot] : todo) Settle(h, slot).IgnoreError();
  return !any_unsynced_.load();
}

Status Replication::Settle(Handle h, uint32_t slot) {
  if (!any_unsynced_.load()) return Status::Ok();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (unsynced_.count({h, slot}) == 0) return Status::Ok();
  }
  const ServerId primary = PrimaryOfSlot(self_, slot, cluster_.size());
  auto gone = [](const Status& st) {
    // The file was removed (or is not replicated): nothing to serve.
    return st.code() == Code::kStale || st.code() == Code::kNotFound ||
           st.code() == Code::kInvalid;
  };
  Result<v1::ReplicasReply> m = Ask(h, v1::REPLICAS_MARK_STALE, primary, slot);
  bool settled = m.ok() || gone(m.status());
  if (!settled) {
    // Refused because it is the last current copy of those units (nothing
    // better exists: it serves), or already stale, or M did not answer.
    Result<v1::ReplicasReply> g = Ask(h, v1::REPLICAS_GET, 0, 0);
    if (g.ok()) {
      View v;
      v.layout = FromProto(g->layout());
      for (const v1::ReplicaRef& s : g->stale()) v.stale.emplace_back(s.primary(), s.slot());
      settled = true;
      if (!v.Stale(primary, slot)) {
        CLF_LOG_WARN("replication: copy {} of server {}'s units of {} may have lost writes in an "
                     "unclean stop, but it is their last current copy; it keeps serving",
                     slot, primary, h);
      }
    } else {
      settled = gone(g.status());
    }
  }
  if (!settled) {
    return NotCurrent("copy " + std::to_string(slot) + " of " + std::to_string(h) +
                      " may have lost writes when this server stopped uncleanly, and its "
                      "metadata server has not recorded it stale yet (" +
                      m.status().ToString() + ")");
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    unsynced_.erase({h, slot});
    any_unsynced_ = !unsynced_.empty();
    views_.erase(h);
    ++changes_;
  }
  if (m.ok()) {
    marked_stale_.fetch_add(1, std::memory_order_relaxed);
    CLF_LOG_INFO("replication: copy {} of server {}'s units of {} recorded stale (it was being "
                 "written when this server stopped uncleanly)",
                 slot, primary, h);
  }
  intents_->Settled(h, slot);
  return Status::Ok();
}

Result<std::vector<Replication::CopyWork>> Replication::ResyncWork(Handle h) {
  const uint32_t n = cluster_.size();
  std::vector<CopyWork> out;
  // A copy here that may have lost writes is never the source of a resync.
  for (uint32_t slot = 0; slot < kMaxReplicas; ++slot) CLF_RETURN_IF_ERROR(Settle(h, slot));
  CLF_ASSIGN_OR_RETURN(View v, ViewOf(h, true));
  if (v.layout.replicas <= 1 || v.stale.empty() || LostFor(h)) return out;
  for (ServerId p : DataServers(v.layout, n)) {
    const uint32_t ord = v.Orderer(p);
    if (ord >= v.layout.replicas || ReplicaServer(p, ord, n) != self_) continue;
    for (uint32_t slot = 0; slot < v.layout.replicas; ++slot) {
      if (v.Stale(p, slot)) out.push_back(CopyWork{h, v.layout, p, ord, slot});
    }
  }
  return out;
}

Result<uint64_t> Replication::CopyRange(const CopyWork& w, uint64_t off, uint64_t len) {
  CLF_ASSIGN_OR_RETURN(ObjectStore * store, stores_->For(w.from));
  auto held = order_.Enter(w.handle, w.primary, off, off + len);
  CLF_ASSIGN_OR_RETURN(ObjectSize size, store->Size(w.handle));
  if (off >= size.size) return uint64_t{0};
  len = std::min(len, size.size - off);
  CLF_RETURN_IF_ERROR(SendRange(store, w, off, len));
  return len;
}

Status Replication::SendRange(ObjectStore* from, const CopyWork& w, uint64_t off, uint64_t len) {
  std::string buf;
  const std::vector<Extent> extents{Extent{off, len}};
  CLF_RETURN_IF_ERROR(from->Read(w.handle, extents, &buf));
  return Send(ReplicaServer(w.primary, w.to, cluster_.size()),
              ObjectRef::Forwarded(w.handle, w.to, w.layout.replicas, w.from),
              Request{extents, buf, false, false});
}

Result<uint64_t> Replication::FinishCopy(const CopyWork& w, uint64_t copied) {
  CLF_ASSIGN_OR_RETURN(ObjectStore * store, stores_->For(w.from));
  auto held = order_.Enter(w.handle, w.primary, 0, UINT64_MAX);
  CLF_ASSIGN_OR_RETURN(ObjectSize size, store->Size(w.handle));
  const ServerId to = ReplicaServer(w.primary, w.to, cluster_.size());
  const ObjectRef copy = ObjectRef::Forwarded(w.handle, w.to, w.layout.replicas, w.from);
  uint64_t more = 0;
  for (uint64_t off = copied; off < size.size;) {
    const uint64_t len = std::min<uint64_t>(size.size - off, uint64_t{4} << 20);
    CLF_RETURN_IF_ERROR(SendRange(store, w, off, len));
    off += len;
    more += len;
  }
  CLF_ASSIGN_OR_RETURN(transport::TcpTransport * path, PeerPath(to));
  CLF_RETURN_IF_ERROR(path->Truncate(copy, size.size));
  CLF_RETURN_IF_ERROR(path->Sync(copy));
  CLF_RETURN_IF_ERROR(Ask(w.handle, v1::REPLICAS_MARK_CURRENT, w.primary, w.to).status());
  CLF_LOG_INFO("replication: copy {} of server {}'s units of {} resynced from copy {} ({} bytes)",
               w.to, w.primary, w.handle, w.from, size.size);
  return more;
}

Result<v1::ReplicasReply> Replication::Ask(Handle h, v1::ReplicasOp op, ServerId primary,
                                           uint32_t slot) {
  v1::ReplicasRequest r;
  r.set_handle(h);
  r.set_op(op);
  if (op != v1::REPLICAS_GET) {
    r.mutable_copy()->set_primary(primary);
    r.mutable_copy()->set_slot(slot);
  }
  return ask_m_(ServerOf(h), r);
}

Result<Replication::View> Replication::ViewOf(Handle h, bool fresh) {
  uint64_t gen;
  {
    std::lock_guard<std::mutex> l(mu_);
    // A pause the freeze detector has not seen yet (this thread ran first).
    if (NowMs() - last_tick_ms_.load() > kFreezeMs) {
      views_.clear();
      ++changes_;
    }
    if (!fresh) {
      auto it = views_.find(h);
      if (it != views_.end()) return it->second;
    }
    gen = changes_;
  }
  Result<v1::ReplicasReply> rep = Ask(h, v1::REPLICAS_GET, 0, 0);
  if (!rep.ok()) {
    return rep.status().WithContext("replica state of " + std::to_string(h) + " from server " +
                                    std::to_string(ServerOf(h)));
  }
  View v;
  v.layout = FromProto(rep->layout());
  for (const v1::ReplicaRef& s : rep->stale()) v.stale.emplace_back(s.primary(), s.slot());
  std::lock_guard<std::mutex> l(mu_);
  if (changes_ == gen) {
    if (views_.size() >= kMaxCached) views_.clear();
    views_[h] = v;
  }
  return v;
}

Result<ServerId> Replication::PrimaryOf(const ObjectRef& obj, const View& v) const {
  const uint32_t n = cluster_.size();
  if (v.layout.replicas <= 1 || v.layout.stripe_count == 0) {
    return Invalid("handle " + std::to_string(obj.handle) + " is not a replicated file");
  }
  if (obj.replicas != v.layout.replicas) {
    return Invalid("the file has " + std::to_string(v.layout.replicas) +
                   " copies; the request says " + std::to_string(obj.replicas));
  }
  const ServerId primary = PrimaryOfSlot(self_, obj.slot, n);
  if (StripeIndex(v.layout, n, primary) < 0) {
    return Invalid("server " + std::to_string(self_) + " holds no copy in slot " +
                   std::to_string(obj.slot) + " of this file");
  }
  return primary;
}

Result<transport::TcpTransport*> Replication::PeerPath(ServerId s) {
  if (cluster_.transport == TransportKind::kGrpc) {
    return Status(Code::kNotSupported,
                  "replicated files need the data channel (this cluster's transport is grpc)");
  }
  if (s >= paths_.size()) return Invalid("no server " + std::to_string(s));
  std::lock_guard<std::mutex> l(mu_);
  if (paths_[s] == nullptr) {
    CLF_ASSIGN_OR_RETURN(std::string addr, DataAddressOf(cluster_.servers[s]));
    paths_[s] = std::make_unique<transport::TcpTransport>(std::move(addr), auth_,
                                                          cluster_.rpc_timeout_ms);
  }
  return paths_[s].get();
}

Status Replication::OrderedWrite(const ObjectRef& obj, const std::vector<Extent>& extents,
                                 std::string_view payload, bool sync) {
  return Ordered(obj, Request{extents, payload, sync, false});
}

Status Replication::OrderedSync(const ObjectRef& obj) {
  static const std::vector<Extent> kNone;
  return Ordered(obj, Request{kNone, {}, true, true});
}

Status Replication::Send(ServerId to, const ObjectRef& obj, const Request& q) {
  CLF_ASSIGN_OR_RETURN(transport::TcpTransport * path, PeerPath(to));
  if (q.sync_only) return path->Sync(obj);
  std::vector<iovec> iov{iovec{const_cast<char*>(q.payload.data()), q.payload.size()}};
  return path->Write(obj, q.extents, iov, q.sync);
}

Status Replication::Ordered(const ObjectRef& obj, const Request& q) {
  const uint32_t n = cluster_.size();
  if (LostFor(obj.handle)) {
    return NotCurrent("this server's store is new; its copies are being recorded stale");
  }
  CLF_RETURN_IF_ERROR(Settle(obj.handle, obj.slot));
  CLF_ASSIGN_OR_RETURN(View v, ViewOf(obj.handle, false));
  CLF_ASSIGN_OR_RETURN(ServerId primary, PrimaryOf(obj, v));
  bool fresh = false;
  int refused = 0;  // pass-ons the earlier copy refused
  for (;;) {
    const uint32_t ord = v.Orderer(primary);
    if (ord == obj.slot) return ApplyAndForward(obj, primary, q);
    if (!fresh) {
      CLF_ASSIGN_OR_RETURN(v, ViewOf(obj.handle, true));
      fresh = true;
      continue;
    }
    if (ord > obj.slot) {
      return NotCurrent("copy " + std::to_string(obj.slot) + " of server " +
                        std::to_string(primary) + "'s units of " + std::to_string(obj.handle) +
                        " is stale");
    }
    // An earlier copy is current: it orders. Pass the write on to it; if it
    // does not answer, record it stale and look again.
    const ServerId to = ReplicaServer(primary, ord, n);
    Status st = Send(to, ObjectRef(obj.handle, ord, obj.replicas), q);
    if (st.code() == Code::kNotCurrent && ++refused <= kPassOnRetries) {
      // The state changed while the write travelled (that copy was just
      // recorded stale, e.g. by another write's pass-on, while its server
      // was stopped): look again; this copy may order it now.
      CLF_ASSIGN_OR_RETURN(v, ViewOf(obj.handle, true));
      continue;
    }
    if (st.ok() || !Unreachable(st)) return st;
    CLF_LOG_WARN("replication: copy {} of {} (server {}) did not answer ({}); marking it stale",
                 ord, obj.handle, to, st.ToString());
    Result<v1::ReplicasReply> m = Ask(obj.handle, v1::REPLICAS_MARK_STALE, primary, ord);
    if (!m.ok()) return m.status().WithContext("marking an unreachable copy stale");
    marked_stale_.fetch_add(1, std::memory_order_relaxed);
    v.stale.clear();
    for (const v1::ReplicaRef& s : m->stale()) v.stale.emplace_back(s.primary(), s.slot());
  }
}

Status Replication::ApplyAndForward(const ObjectRef& obj, ServerId primary, const Request& q) {
  const uint32_t n = cluster_.size();
  uint64_t lo = 0, hi = UINT64_MAX;  // a sync: after every write in flight
  if (!q.sync_only) {
    lo = UINT64_MAX;
    hi = 0;
    for (const Extent& e : q.extents) {
      lo = std::min(lo, e.offset);
      hi = std::max(hi, e.offset + e.length);
    }
    if (lo >= hi) return Status::Ok();
  }
  auto held = order_.Enter(obj.handle, primary, lo, hi);

  CLF_ASSIGN_OR_RETURN(ObjectStore * store, stores_->For(obj.slot));
  if (q.sync_only) {
    CLF_RETURN_IF_ERROR(store->Sync(obj.handle));
  } else {
    CLF_ASSIGN_OR_RETURN(auto writing, BeginWrite(obj.handle, obj.slot));
    CLF_RETURN_IF_ERROR(store->Write(obj.handle, q.extents, q.payload, q.sync));
  }
  for (uint32_t i = 0; i < obj.replicas; ++i) {
    if (i == obj.slot) continue;
    const ServerId to = ReplicaServer(primary, i, n);
    Status st = Send(to, ObjectRef::Forwarded(obj.handle, i, obj.replicas, obj.slot), q);
    forwarded_.fetch_add(1, std::memory_order_relaxed);
    if (st.ok()) continue;
    // That copy (having asked M) does not take this copy for the orderer.
    if (st.code() == Code::kNotCurrent) return st;
    CLF_LOG_WARN("replication: copy {} of {} (server {}) missed a {} ({}); marking it stale", i,
                 obj.handle, to, q.sync_only ? "sync" : "write", st.ToString());
    Result<v1::ReplicasReply> m = Ask(obj.handle, v1::REPLICAS_MARK_STALE, primary, i);
    if (!m.ok()) {
      return Status(Code::kUnavailable, "copy " + std::to_string(i) + " on server " +
                                            std::to_string(to) + " missed a write (" +
                                            st.ToString() + ") and its metadata server could not "
                                            "record it: " + m.status().ToString());
    }
    marked_stale_.fetch_add(1, std::memory_order_relaxed);
  }
  return Status::Ok();
}

Status Replication::CheckForwarded(const ObjectRef& obj) {
  for (bool fresh : {false, true}) {
    CLF_ASSIGN_OR_RETURN(View v, ViewOf(obj.handle, fresh));
    CLF_ASSIGN_OR_RETURN(ServerId primary, PrimaryOf(obj, v));
    if (v.Orderer(primary) == obj.orderer) return Status::Ok();
  }
  return NotCurrent("copy " + std::to_string(obj.orderer) + " of " + std::to_string(obj.handle) +
                    " does not order its writes");
}

Status Replication::CheckCurrent(const ObjectRef& obj) {
  if (LostFor(obj.handle)) {
    return NotCurrent("this server's store is new; its copies are being recorded stale");
  }
  CLF_RETURN_IF_ERROR(Settle(obj.handle, obj.slot));
  for (bool fresh : {false, true}) {
    CLF_ASSIGN_OR_RETURN(View v, ViewOf(obj.handle, fresh));
    CLF_ASSIGN_OR_RETURN(ServerId primary, PrimaryOf(obj, v));
    if (!v.Stale(primary, obj.slot)) return Status::Ok();
  }
  return NotCurrent("copy " + std::to_string(obj.slot) + " of " + std::to_string(obj.handle) +
                    " on server " + std::to_string(self_) + " is stale");
}

}  // namespace clf::server
