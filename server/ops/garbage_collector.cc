#include "server/ops/garbage_collector.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <chrono>

#include "common/log.h"

namespace clf::server {

GarbageCollector::GarbageCollector(const ClusterConfig& cluster, RocksMetaStore* store,
                                   ObjectStore* objects, RemoveCollective remove,
                                   RefreshSizes refresh)
    : cluster_(cluster),
      store_(store),
      objects_(objects),
      remove_(std::move(remove)),
      refresh_(std::move(refresh)) {}

Status GarbageCollector::Drop(Handle h, const v1::Layout& l) {
  RocksMetaStore::Batch b;
  b.PutGarbage(h, l);
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  Queue(h, l);
  return Status::Ok();
}

void GarbageCollector::Queue(Handle h, const v1::Layout& l) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (queue_.empty()) oldest_ms_ = MonoMs();
    queue_.emplace_back(h, l);
  }
  cv_.notify_one();
}

int64_t GarbageCollector::MonoMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool GarbageCollector::Defer() const {
  if (queue_.empty() || cluster_.purge_idle_ms == 0) return false;
  const int64_t now = MonoMs();
  if (now - last_fg_ms_.load(std::memory_order_relaxed) >= cluster_.purge_idle_ms) return false;
  if (now - oldest_ms_ >= cluster_.purge_max_defer_ms) return false;
  struct statvfs sv;
  if (objects_ != nullptr && ::statvfs(objects_->dir().c_str(), &sv) == 0 && sv.f_blocks > 0 &&
      sv.f_bavail * 100 < sv.f_blocks * kLowSpacePct) {
    return false;
  }
  return true;
}

void GarbageCollector::QueueSized(const v1::Attr& a) {
  // Onehop mode makes a file's objects at its first write to each server,
  // so a closed file (no writer counted: its size is the one its writers
  // reported) has objects only as far as its size, or the size a truncate
  // shrank it from (size_high), reaches. Other modes create objects on
  // every server of the layout at create: no hint. A write that failed on
  // some servers (the size not extended) or a writer that died before
  // reporting can leave objects beyond it: `clf fsck` finds them
  // (objects without a file).
  if (cluster_.metadata_mode == MetadataMode::kOneHop && a.writers() == 0) {
    std::lock_guard<std::mutex> lk(mu_);
    sizes_[a.handle()] = std::max(a.size(), a.size_high());
  }
  Queue(a.handle(), a.layout());
}

void GarbageCollector::Removed(Handle h) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.erase(
        std::remove_if(queue_.begin(), queue_.end(), [h](const auto& e) { return e.first == h; }),
        queue_.end());
  }
  RocksMetaStore::Batch b;
  b.DeleteGarbage(h);
  Status s = store_->Commit(b);
  if (!s.ok()) CLF_LOG_WARN("garbage record of {:x} not dropped: {}", h, s.ToString());
}

bool GarbageCollector::Collect() {
  std::vector<std::pair<Handle, v1::Layout>> all;
  std::unordered_map<Handle, uint64_t> sizes;
  {
    std::lock_guard<std::mutex> lk(mu_);
    all.swap(queue_);
    sizes.swap(sizes_);
  }
  if (all.empty()) return true;
  bool ok = true;
  std::vector<std::pair<Handle, v1::Layout>> retry;
  for (size_t i = 0; i < all.size(); i += kBatch) {
    const size_t end = std::min(all.size(), i + kBatch);
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
    Result<v1::CollectiveReply> rep = remove_(files);
    RocksMetaStore::Batch b;
    for (const v1::CollFile& f : files) b.DeleteGarbage(f.handle());
    if (!rep.ok() || !store_->Commit(b).ok()) {
      if (!rep.ok()) {
        CLF_LOG_WARN("removing {} data objects: {} (will retry)", files.size(),
                     rep.status().ToString());
      }
      retry.insert(retry.end(), all.begin() + static_cast<long>(i),
                   all.begin() + static_cast<long>(end));
      ok = false;
    }
  }
  if (!retry.empty()) {
    std::lock_guard<std::mutex> lk(mu_);
    oldest_ms_ = 0;  // retried ones are not held back again
    queue_.insert(queue_.end(), retry.begin(), retry.end());
    for (const auto& [h, l] : retry) {
      if (auto sz = sizes.find(h); sz != sizes.end()) sizes_[h] = sz->second;
    }
  }
  return ok;
}

void GarbageCollector::Run() {
  {
    // Garbage recorded before a restart.
    std::vector<std::pair<Handle, v1::Layout>> old = store_->Garbage();
    std::lock_guard<std::mutex> lk(mu_);
    oldest_ms_ = 0;
    queue_.insert(queue_.end(), old.begin(), old.end());
  }
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait(l, [this] { return stop_ || !queue_.empty() || !refresh_queue_.empty(); });
    if (stop_) break;
    // Let removals (and size refreshes) accumulate so one collective carries a batch.
    cv_.wait_for(l, std::chrono::milliseconds(kDelayMs), [this] {
      return stop_ || queue_.size() >= kBatch || refresh_queue_.size() >= kBatch;
    });
    if (stop_) break;
    std::vector<Handle> refresh;
    refresh.swap(refresh_queue_);
    const bool defer = Defer();
    l.unlock();
    if (!refresh.empty()) {
      // Best effort, as ReportWrite's refresh: the reported sizes stand.
      Status g = refresh_(refresh);
      if (!g.ok()) CLF_LOG_WARN("size refresh of {} files: {}", refresh.size(), g.ToString());
    }
    const bool ok = defer || Collect();
    l.lock();
    if (!ok) {
      cv_.wait_for(l, std::chrono::seconds(2), [this] { return stop_; });
    } else if (defer) {
      // Held back by the purge throttle: look again shortly (a refresh queued
      // meanwhile still goes at once).
      cv_.wait_for(l, std::chrono::milliseconds(std::max<uint32_t>(cluster_.purge_idle_ms / 2, 10)),
                   [this] { return stop_ || !refresh_queue_.empty(); });
    }
  }
}

void GarbageCollector::QueueRefresh(const std::vector<Handle>& hs) {
  if (hs.empty()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    refresh_queue_.insert(refresh_queue_.end(), hs.begin(), hs.end());
  }
  cv_.notify_one();
}

void GarbageCollector::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

}  // namespace clf::server
