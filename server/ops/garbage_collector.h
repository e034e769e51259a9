// GarbageCollector: the data objects of removed files, freed in the
// background. Their handles are recorded ('g' keys) in the same WriteBatch
// that removes the metadata; Run() frees them in batches, one REMOVE
// collective per batch of up to kBatch files, and retries what failed. It
// also runs the size refreshes Meta.Commit queues (one stat collective per
// batch). The purge throttle: client requests note their arrival
// (NoteForeground), and garbage is held back while one came less than the
// cluster's purge_idle_ms ago, so removing data objects (an unlink each,
// with the file system's discard) does not compete with the foreground for
// the cores; never longer than purge_max_defer_ms, nor while the object
// store's file system has less than kLowSpacePct percent free.
// Thread safety: thread safe (one mutex); Run blocks until Stop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "clf/v1/peer.pb.h"
#include "common/config.h"
#include "common/status.h"
#include "server/data/object_store.h"
#include "server/store/meta_store.h"

namespace clf::server {

class GarbageCollector {
 public:
  // A REMOVE collective over `files` (blocks until gathered).
  using RemoveCollective = std::function<Result<v1::CollectiveReply>(std::vector<v1::CollFile>)>;
  // The size refresh of files (best effort: the reported sizes stand).
  using RefreshSizes = std::function<Status(const std::vector<Handle>&)>;

  // objects: this server's object store (its free space), or null.
  GarbageCollector(const ClusterConfig& cluster, RocksMetaStore* store, ObjectStore* objects,
                   RemoveCollective remove, RefreshSizes refresh);

  // Records h's objects as garbage (durably) and queues their removal.
  Status Drop(Handle h, const v1::Layout& l);
  // Queues a file whose garbage record is committed.
  void Queue(Handle h, const v1::Layout& l);
  // The same, for a file removed whole: in onehop mode with no writer its
  // final size tells the removal which servers can hold an object of it.
  void QueueSized(const v1::Attr& a);
  // h's objects were removed by a collective of its own: its queued entry
  // and garbage record are dropped.
  void Removed(Handle h);
  // Size refreshes to run in the background, batched over kDelayMs.
  void QueueRefresh(const std::vector<Handle>& hs);

  // One pass over what is queued; false if some could not be removed
  // (queued again).
  bool Collect();
  // Runs until Stop(); call on a dedicated thread.
  void Run();
  void Stop();

  void NoteForeground() { last_fg_ms_.store(MonoMs(), std::memory_order_relaxed); }

  static constexpr size_t kBatch = 2048;
  static constexpr int kDelayMs = 500;
  static constexpr uint64_t kLowSpacePct = 10;

 private:
  static int64_t MonoMs();  // steady clock (NowMs is the system clock)
  // The purge throttle's decision (caller holds mu_).
  bool Defer() const;

  const ClusterConfig& cluster_;
  RocksMetaStore* const store_;
  ObjectStore* const objects_;
  const RemoveCollective remove_;
  const RefreshSizes refresh_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<Handle, v1::Layout>> queue_;  // committed garbage, not yet removed
  std::unordered_map<Handle, uint64_t> sizes_;        // final sizes of queued garbage (QueueSized)
  std::vector<Handle> refresh_queue_;
  bool stop_ = false;
  int64_t oldest_ms_ = 0;  // when the oldest entry of queue_ was queued (0: long ago)
  std::atomic<int64_t> last_fg_ms_{0};
};

}  // namespace clf::server
