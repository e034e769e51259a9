#include "server/ops/write_intents.h"

#include <chrono>

#include "common/log.h"

namespace clf::server {
WriteIntents::WriteIntents(RocksMetaStore* meta, CopyStores* stores)
    : meta_(meta), stores_(stores), leftover_(meta->Unsynced()) {
  // A leftover copy keeps its record until it is settled: it is marked
  // durable here so a write to it does not commit the record again.
  for (const Copy& c : leftover_) {
    entries_[c].durable = true;
    entries_[c].leftover = true;
  }
  if (!leftover_.empty()) {
    CLF_LOG_WARN("replication: {} copies of replicated files were being written when this "
                 "server last stopped without a clean shutdown; they may have lost writes and "
                 "will be recorded stale on their metadata servers",
                 leftover_.size());
  }
  flusher_ = std::thread([this] { Run(); });
}

WriteIntents::~WriteIntents() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

Result<std::unique_ptr<WriteIntents::Writing>> WriteIntents::Begin(Handle h, uint32_t slot) {
  const Copy c{h, slot};
  std::unique_lock<std::mutex> l(mu_);
  Entry& e = entries_[c];  // std::map: the reference outlives other inserts and erases
  ++e.writing;
  ++e.gen;
  e.last = Clock::now();
  while (!e.durable) {
    if (e.recording) {
      cv_.wait(l);
      continue;
    }
    e.recording = true;
    l.unlock();
    RocksMetaStore::Batch b;
    b.PutUnsynced(h, slot);
    Status st = meta_->CommitSynced(b);
    l.lock();
    e.recording = false;
    cv_.notify_all();
    if (!st.ok()) {
      --e.writing;
      return st.WithContext("recording a write to copy " + std::to_string(slot) + " of " +
                            std::to_string(h));
    }
    e.durable = true;
    ++written_;
  }
  return std::make_unique<Writing>(this, c);
}

void WriteIntents::End(Copy c) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(c);
  if (it != entries_.end()) --it->second.writing;
}

void WriteIntents::Settled(Handle h, uint32_t slot) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find({h, slot});
  if (it == entries_.end() || !it->second.leftover) return;
  it->second.leftover = false;
  // Written since this run started: the flusher drops the record once the
  // copy is synced (those bytes may still be only in memory).
  if (it->second.gen != 0 || it->second.writing != 0 || it->second.recording) return;
  RocksMetaStore::Batch b;
  b.DeleteUnsynced(h, slot);
  if (meta_->Commit(b).ok()) {
    entries_.erase(it);
    ++dropped_;
  }
}

void WriteIntents::Flush(int64_t idle_ms) {
  const Clock::time_point now = Clock::now();
  std::vector<std::pair<Copy, uint64_t>> due;  // (copy, gen when taken)
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [c, e] : entries_) {
      // A leftover copy waits for Settled: its record says it may have lost
      // writes, whatever a sync now would make durable.
      if (e.durable && !e.leftover && !e.recording && e.writing == 0 && e.gen != 0 &&
          now - e.last >= std::chrono::milliseconds(idle_ms)) {
        due.emplace_back(c, e.gen);
      }
    }
  }
  if (due.empty()) return;
  RocksMetaStore::Batch b;
  std::vector<Copy> drop;
  for (const auto& [c, gen] : due) {
    ObjectStore* store = stores_->IfOpen(c.second);
    Status st = store != nullptr ? store->Sync(c.first) : Status::Ok();
    if (!st.ok()) {
      CLF_LOG_WARN("replication: syncing copy {} of {}: {}", c.second, c.first, st.ToString());
      continue;
    }
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(c);
    // A write that began after the sync started may not be on disk.
    if (it == entries_.end() || it->second.gen != gen || it->second.writing != 0 ||
        it->second.recording) {
      continue;
    }
    // From here a Begin waits (recording) and then writes the record again.
    it->second.recording = true;
    it->second.durable = false;
    b.DeleteUnsynced(c.first, c.second);
    drop.push_back(c);
  }
  if (drop.empty()) return;
  Status st = meta_->Commit(b);
  if (!st.ok()) CLF_LOG_WARN("replication: dropping write records: {}", st.ToString());
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const Copy& c : drop) {
      Entry& e = entries_[c];
      e.recording = false;
      if (!st.ok()) {
        e.durable = true;  // the record is still there
      } else {
        ++dropped_;
        if (e.writing == 0) entries_.erase(c);
      }
    }
  }
  cv_.notify_all();
}

void WriteIntents::Run() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, std::chrono::milliseconds(kIdleMs / 2));
    if (stop_) break;
    l.unlock();
    Flush(kIdleMs);
    l.lock();
  }
}

void WriteIntents::Close() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  Flush(0);
  // Leftover copies never settled keep their records: they may still have
  // lost writes in the earlier stop.
}

uint64_t WriteIntents::records_written() const {
  std::lock_guard<std::mutex> l(const_cast<std::mutex&>(mu_));
  return written_;
}

uint64_t WriteIntents::records_dropped() const {
  std::lock_guard<std::mutex> l(const_cast<std::mutex&>(mu_));
  return dropped_;
}

}  // namespace clf::server
