// MetaOps' background work: the data objects of removed files (garbage
// records, one REMOVE collective per batch), size refreshes queued by
// Meta.Commit, and the destruction of orphans at their last close.
#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>
#include <mutex>

#include "common/log.h"
#include "server/ops/meta_ops.h"
#include "server/ops/ops_internal.h"

namespace clf::server {

Status MetaOps::DropDataObjects(Handle h, const v1::Layout& l) {
  RocksMetaStore::Batch b;
  b.PutGarbage(h, l);
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  QueueGarbage(h, l);
  return Status::Ok();
}

void MetaOps::QueueGarbage(Handle h, const v1::Layout& l) {
  {
    std::lock_guard<std::mutex> lk(gc_mu_);
    if (gc_queue_.empty()) gc_oldest_ms_ = MonoMs();
    gc_queue_.emplace_back(h, l);
  }
  gc_cv_.notify_one();
}

int64_t MetaOps::MonoMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool MetaOps::DeferGarbage() const {
  if (gc_queue_.empty() || cluster_.purge_idle_ms == 0) return false;
  const int64_t now = MonoMs();
  if (now - last_fg_ms_.load(std::memory_order_relaxed) >= cluster_.purge_idle_ms) return false;
  if (now - gc_oldest_ms_ >= cluster_.purge_max_defer_ms) return false;
  struct statvfs sv;
  if (objects_ != nullptr && ::statvfs(objects_->dir().c_str(), &sv) == 0 && sv.f_blocks > 0 &&
      sv.f_bavail * 100 < sv.f_blocks * kGcLowSpacePct) {
    return false;
  }
  return true;
}

void MetaOps::QueueSizedGarbage(const v1::Attr& a) {
  // Onehop mode makes a file's objects at its first write to each server,
  // so a closed file (no writer counted: its size is the one its writers
  // reported) has objects only as far as its size, or the size a truncate
  // shrank it from (size_high), reaches. Other modes create objects on
  // every server of the layout at create: no hint. A write that failed on
  // some servers (the size not extended) or a writer that died before
  // reporting can leave objects beyond it: `clf fsck` finds them
  // (objects without a file).
  if (cluster_.metadata_mode == MetadataMode::kOneHop && a.writers() == 0) {
    std::lock_guard<std::mutex> lk(gc_mu_);
    gc_sizes_[a.handle()] = std::max(a.size(), a.size_high());
  }
  QueueGarbage(a.handle(), a.layout());
}

bool MetaOps::CollectGarbage() {
  std::vector<std::pair<Handle, v1::Layout>> all;
  std::unordered_map<Handle, uint64_t> sizes;
  {
    std::lock_guard<std::mutex> lk(gc_mu_);
    all.swap(gc_queue_);
    sizes.swap(gc_sizes_);
  }
  if (all.empty()) return true;
  bool ok = true;
  std::vector<std::pair<Handle, v1::Layout>> retry;
  for (size_t i = 0; i < all.size(); i += kGcBatch) {
    const size_t end = std::min(all.size(), i + kGcBatch);
    std::vector<v1::CollFile> files;
    for (size_t k = i; k < end; ++k) {
      v1::CollFile f;
      f.set_handle(all[k].first);
      *f.mutable_layout() = all[k].second;
      if (auto sz = sizes.find(all[k].first); sz != sizes.end()) {
        f.set_size(sz->second);
        f.set_sized(true);
      }
      files.push_back(std::move(f));
    }
    // One removal collective for the whole batch (removal is idempotent).
    Result<v1::CollectiveReply> rep = Collective(v1::COLL_REMOVE, files);
    RocksMetaStore::Batch b;
    for (const v1::CollFile& f : files) b.DeleteGarbage(f.handle());
    if (!rep.ok() || !store_->Commit(b).ok()) {
      if (!rep.ok()) {
        CLF_LOG_WARN("removing {} data objects: {} (will retry)", files.size(),
                     rep.status().ToString());
      }
      retry.insert(retry.end(), all.begin() + static_cast<long>(i), all.begin() + static_cast<long>(end));
      ok = false;
    }
  }
  if (!retry.empty()) {
    std::lock_guard<std::mutex> lk(gc_mu_);
    gc_oldest_ms_ = 0;  // retried ones are not held back again
    gc_queue_.insert(gc_queue_.end(), retry.begin(), retry.end());
    for (const auto& [h, l] : retry) {
      if (auto sz = sizes.find(h); sz != sizes.end()) gc_sizes_[h] = sz->second;
    }
  }
  return ok;
}

void MetaOps::RunGc() {
  {
    // Garbage recorded before a restart.
    std::vector<std::pair<Handle, v1::Layout>> old = store_->Garbage();
    std::lock_guard<std::mutex> lk(gc_mu_);
    gc_oldest_ms_ = 0;
    gc_queue_.insert(gc_queue_.end(), old.begin(), old.end());
  }
  std::unique_lock<std::mutex> l(gc_mu_);
  while (!gc_stop_) {
    gc_cv_.wait(l, [this] { return gc_stop_ || !gc_queue_.empty() || !refresh_queue_.empty(); });
    if (gc_stop_) break;
    // Let removals (and size refreshes) accumulate so one collective carries a batch.
    gc_cv_.wait_for(l, std::chrono::milliseconds(kGcDelayMs), [this] {
      return gc_stop_ || gc_queue_.size() >= kGcBatch || refresh_queue_.size() >= kGcBatch;
    });
    if (gc_stop_) break;
    std::vector<Handle> refresh;
    refresh.swap(refresh_queue_);
    const bool defer = DeferGarbage();
    l.unlock();
    if (!refresh.empty()) {
      // Best effort, as ReportWrite's refresh: the reported sizes stand.
      Status g = RefreshSizes(refresh);
      if (!g.ok()) CLF_LOG_WARN("size refresh of {} files: {}", refresh.size(), g.ToString());
    }
    const bool ok = defer || CollectGarbage();
    l.lock();
    if (!ok) {
      gc_cv_.wait_for(l, std::chrono::seconds(2), [this] { return gc_stop_; });
    } else if (defer) {
      // Held back by the purge throttle: look again shortly (a refresh queued
      // meanwhile still goes at once).
      gc_cv_.wait_for(l, std::chrono::milliseconds(std::max<uint32_t>(cluster_.purge_idle_ms / 2, 10)),
                      [this] { return gc_stop_ || !refresh_queue_.empty(); });
    }
  }
}

void MetaOps::QueueRefresh(const std::vector<Handle>& hs) {
  if (hs.empty()) return;
  {
    std::lock_guard<std::mutex> lk(gc_mu_);
    refresh_queue_.insert(refresh_queue_.end(), hs.begin(), hs.end());
  }
  gc_cv_.notify_one();
}

void MetaOps::StopGc() {
  {
    std::lock_guard<std::mutex> l(gc_mu_);
    gc_stop_ = true;
  }
  gc_cv_.notify_all();
}

Status MetaOps::RefreshSizes(const std::vector<Handle>& hs) {
  std::vector<v1::Attr> attrs;
  attrs.reserve(hs.size());
  for (Handle h : hs) {
    if (ServerOf(h) != self_) continue;
    Result<v1::Attr> a = store_->GetAttr(h);
    if (a.ok() && a->type() == v1::FT_REGULAR) attrs.push_back(std::move(*a));
  }
  if (attrs.empty()) return Status::Ok();
  // What each inode was before the gather: a change committed meanwhile (a
  // truncate, a size report) is newer than the gathered size, which must then
  // not be applied (it could bring back bytes a truncate cut off).
  std::vector<std::pair<uint64_t, v1::Timespec>> before;
  before.reserve(attrs.size());
  for (const v1::Attr& a : attrs) before.emplace_back(a.size(), a.ctime());
  std::vector<v1::Attr*> ptrs;
  for (v1::Attr& a : attrs) ptrs.push_back(&a);
  CLF_RETURN_IF_ERROR(GatherSizes(ptrs));  // one collective for all of them
  RocksMetaStore::Batch b;
  for (size_t i = 0; i < attrs.size(); ++i) {
    const v1::Attr& g = attrs[i];
    std::lock_guard<std::mutex> l(InodeLock(g.handle()));
    Result<v1::Attr> cur = store_->GetAttr(g.handle());
    if (!cur.ok()) continue;  // removed meanwhile
    if (cur->size() != before[i].first || cur->ctime().sec() != before[i].second.sec() ||
        cur->ctime().nsec() != before[i].second.nsec()) {
      continue;  // changed meanwhile
    }
    cur->set_size(std::max(cur->size(), g.size()));
    cur->set_blocks(g.blocks());
    b.PutAttr(*cur);
  }
  return store_->Commit(b);
}

Status MetaOps::Destroy(Handle h) {
  if (ServerOf(h) != self_) return Status(Code::kStale, "handle not owned here");
  std::unique_lock<std::mutex> l(InodeLock(h));
  CLF_ASSIGN_OR_RETURN(bool orphan, store_->IsOrphan(h));
  if (!orphan) return Status::Ok();  // relinked or already gone: nothing to free
  CLF_ASSIGN_OR_RETURN(v1::Attr a, store_->GetAttr(h));
  if (a.nlink() > 0) {
    RocksMetaStore::Batch b;
    b.DeleteOrphan(h);
    return store_->Commit(b);
  }
  RocksMetaStore::Batch b;
  CLF_RETURN_IF_ERROR(DestroyLocal(a, &b));
  b.PutGarbage(h, a.layout());
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  --inodes_;
  QueueGarbage(h, a.layout());
  return Status::Ok();
}

}  // namespace clf::server
