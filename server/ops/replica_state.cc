#include "server/ops/replica_state.h"

#include <algorithm>
#include <future>
#include <memory>
#include <mutex>

#include "common/layout_proto.h"
#include "common/log.h"

namespace clf::server {

Result<v1::ReplicasReply> ReplicaStateOps::Serve(const v1::ReplicasRequest& r) {
  const Handle h = r.handle();
  if (ServerOf(h) != self_) return Status(Code::kStale, "handle is not owned by this server");
  const uint32_t n = cluster_.size();
  v1::ReplicasReply rep;
  bool changed = false;
  {
    std::lock_guard<std::mutex> l(locks_->Inode(h));
    CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(h));
    if (a.type() != v1::FT_REGULAR) return Invalid("replicas: not a regular file");
    const Layout layout = FromProto(a.layout());
    if (r.op() != v1::REPLICAS_GET) {
      if (layout.replicas <= 1) return Invalid("replicas: the file is not replicated");
      if (r.copy().slot() >= layout.replicas ||
          StripeIndex(layout, n, r.copy().primary()) < 0) {
        return Invalid("replicas: the file has no copy " + std::to_string(r.copy().slot()) +
                       " of server " + std::to_string(r.copy().primary()) + "'s units");
      }
      auto& stale = *a.mutable_stale_replicas();
      auto same = [&](const v1::ReplicaRef& s) {
        return s.primary() == r.copy().primary() && s.slot() == r.copy().slot();
      };
      const bool is_stale = std::any_of(stale.begin(), stale.end(), same);
      if (r.op() == v1::REPLICAS_MARK_STALE && !is_stale) {
        const auto of_primary =
            std::count_if(stale.begin(), stale.end(),
                          [&](const v1::ReplicaRef& s) { return s.primary() == r.copy().primary(); });
        if (static_cast<uint32_t>(of_primary) + 1 >= layout.replicas) {
          return Status(Code::kUnavailable,
                        "replicas: copy " + std::to_string(r.copy().slot()) + " of server " +
                            std::to_string(r.copy().primary()) +
                            "'s units is the last current one");
        }
        *stale.Add() = r.copy();
        changed = true;
      } else if (r.op() == v1::REPLICAS_MARK_CURRENT && is_stale) {
        stale.erase(std::remove_if(stale.begin(), stale.end(), same), stale.end());
        changed = true;
      }
      if (changed) {
        RocksMetaStore::Batch b;
        b.PutAttr(a);
        if (a.stale_replicas_size() > 0) {
          b.PutDegraded(h);
        } else {
          b.DeleteDegraded(h);
        }
        CLF_RETURN_IF_ERROR(store_->Commit(b));
        CLF_RETURN_IF_ERROR(store_->SyncWal());
        CLF_LOG_INFO("replicas: copy {} of server {}'s units of {} is now {}", r.copy().slot(),
                     r.copy().primary(), h,
                     r.op() == v1::REPLICAS_MARK_STALE ? "stale" : "current");
      }
    }
    *rep.mutable_layout() = a.layout();
    *rep.mutable_stale() = a.stale_replicas();
  }
  if (changed) TellHolders(h, rep.layout());
  return rep;
}

void ReplicaStateOps::TellHolders(Handle h, const v1::Layout& layout) {
  std::vector<ServerId> holders = CopyServers(FromProto(layout), cluster_.size());
  struct Wait {
    std::mutex mu;
    size_t left;
    std::promise<void> all;
  };
  auto w = std::make_shared<Wait>();
  w->left = holders.size();
  std::future<void> all = w->all.get_future();
  if (holders.empty()) return;
  for (ServerId s : holders) {
    tell_(s, h, [w, s, h](Status st) {
      if (!st.ok()) {
        CLF_LOG_INFO("replicas: server {} not told of {}'s change: {}", s, h, st.ToString());
      }
      std::lock_guard<std::mutex> l(w->mu);
      if (--w->left == 0) w->all.set_value();
    });
  }
  all.wait_for(std::chrono::milliseconds(cluster_.rpc_timeout_ms / 4 + 100));
}

Result<uint64_t> ReplicaStateOps::AnnounceStore(ServerId server, bool fresh) {
  if (!store_->StoreSeen(server)) {
    RocksMetaStore::Batch b;
    b.PutStoreSeen(server);
    CLF_RETURN_IF_ERROR(store_->Commit(b));
    CLF_RETURN_IF_ERROR(store_->SyncWal());
    return uint64_t{0};
  }
  if (!fresh) return uint64_t{0};
  return MarkLostCopies(server);
}

Result<uint64_t> ReplicaStateOps::MarkLostCopies(ServerId lost) {
  const uint32_t n = cluster_.size();
  uint64_t marked = 0;
  for (Handle h : store_->AllAttrHandles()) {
    v1::Layout changed_layout;
    bool changed = false;
    {
      std::lock_guard<std::mutex> l(locks_->Inode(h));
      Result<v1::Attr> a = store_->GetAttr(h);
      if (!a.ok() || a->type() != v1::FT_REGULAR) continue;
      const Layout layout = FromProto(a->layout());
      if (layout.replicas <= 1) continue;
      auto& stale = *a->mutable_stale_replicas();
      for (uint32_t slot : SlotsOn(layout, n, lost)) {
        const ServerId p = PrimaryOfSlot(lost, slot, n);
        bool have = false;
        uint32_t of_p = 0;
        for (const v1::ReplicaRef& x : stale) {
          if (x.primary() != p) continue;
          ++of_p;
          have = have || x.slot() == slot;
        }
        if (have) continue;
        if (of_p + 1 >= layout.replicas) {
          CLF_LOG_ERROR("replicas: server {} lost copy {} of server {}'s units of {}, the last "
                        "current one: those bytes are gone",
                        lost, slot, p, h);
          continue;
        }
        v1::ReplicaRef* x = stale.Add();
        x->set_primary(p);
        x->set_slot(slot);
        ++marked;
        changed = true;
      }
      if (changed) {
        RocksMetaStore::Batch b;
        b.PutAttr(*a);
        b.PutDegraded(h);
        CLF_RETURN_IF_ERROR(store_->Commit(b));
        changed_layout = a->layout();
      }
    }
    if (changed) TellHolders(h, changed_layout);
  }
  if (marked > 0) CLF_RETURN_IF_ERROR(store_->SyncWal());
  CLF_LOG_INFO("replicas: server {} started with an empty store; {} of its copies recorded stale",
               lost, marked);
  return marked;
}

uint64_t ReplicaStateOps::NudgeOnce() {
  const uint32_t n = cluster_.size();
  uint64_t stale_total = 0;
  for (Handle h : store_->Degraded()) {
    Result<v1::Attr> a = store_->GetAttr(h);
    if (!a.ok() || a->stale_replicas_size() == 0) {
      std::lock_guard<std::mutex> l(locks_->Inode(h));
      Result<v1::Attr> again = store_->GetAttr(h);
      if (!again.ok() || again->stale_replicas_size() == 0) {
        RocksMetaStore::Batch b;
        b.DeleteDegraded(h);
        store_->Commit(b).IgnoreError();
      }
      continue;
    }
    stale_total += static_cast<uint64_t>(a->stale_replicas_size());
    // The acting primary of each stale copy's units resyncs it.
    const Layout layout = FromProto(a->layout());
    std::vector<ServerId> told;
    for (const v1::ReplicaRef& x : a->stale_replicas()) {
      uint32_t ord = 0;
      while (ord < layout.replicas &&
             std::any_of(a->stale_replicas().begin(), a->stale_replicas().end(),
                         [&](const v1::ReplicaRef& y) {
                           return y.primary() == x.primary() && y.slot() == ord;
                         })) {
        ++ord;
      }
      if (ord >= layout.replicas) continue;
      const ServerId s = ReplicaServer(x.primary(), ord, n);
      if (std::find(told.begin(), told.end(), s) != told.end()) continue;
      told.push_back(s);
      tell_(s, h, [](Status) {});
    }
  }
  stale_copies_.store(stale_total, std::memory_order_relaxed);
  return stale_total;
}

void ReplicaStateOps::RunNudges() {
  std::unique_lock<std::mutex> l(nudge_mu_);
  while (!stop_) {
    l.unlock();
    NudgeOnce();
    l.lock();
    nudge_cv_.wait_for(l, std::chrono::milliseconds(kNudgeMs), [&] { return stop_; });
  }
}

void ReplicaStateOps::StopNudges() {
  {
    std::lock_guard<std::mutex> l(nudge_mu_);
    stop_ = true;
  }
  nudge_cv_.notify_all();
}

}  // namespace clf::server
