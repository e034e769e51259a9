// WriteIntents: which of this server's copies of replicated files may hold
// writes that are not on its disk yet, kept durably (docs/ARCHITECTURE.md
// "Replicated data", power loss).
//
// A write is acknowledged once every live copy has it in its server's page
// cache. A process crash keeps those bytes (the kernel still has them); a
// power loss of one copy's server does not, and that copy would come back
// current on M and older than its peers. So before the first write to a copy
// after it was last synced, a record (handle, slot) is committed to RocksDB
// with a synced WAL; a flusher thread fdatasyncs copies that saw no write for
// a while and drops their records. A server that finds records at start was
// not stopped cleanly: those copies may have lost writes, and Replication
// refuses to serve or order them until their metadata server has them
// stale (the resync then rewrites them). A clean stop syncs and drops every
// record, so only an unclean one costs resyncs, and only of the copies
// written in the last idle period (kIdleMs) before it.
// Thread safety: thread safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/handle.h"
#include "server/data/copy_stores.h"
#include "server/store/meta_store.h"

namespace clf::server {

class WriteIntents {
 public:
  using Clock = std::chrono::steady_clock;
  using Copy = std::pair<Handle, uint32_t>;  // (handle, slot)

  // Reads the records an earlier run left (leftover()); starts the flusher.
  WriteIntents(RocksMetaStore* meta, CopyStores* stores);
  ~WriteIntents();  // stops the flusher; records stay (Close drops them)
  WriteIntents(const WriteIntents&) = delete;
  WriteIntents& operator=(const WriteIntents&) = delete;

  // A write (or a truncate) of a copy in progress: the copy's record is
  // durable; destroying it ends the write.
  class Writing {
   public:
    Writing(WriteIntents* w, Copy c) : w_(w), c_(c) {}
    ~Writing() { w_->End(c_); }
    Writing(const Writing&) = delete;
    Writing& operator=(const Writing&) = delete;

   private:
    WriteIntents* w_;
    Copy c_;
  };
  // Call before changing the copy's bytes; holds until they are changed.
  Result<std::unique_ptr<Writing>> Begin(Handle h, uint32_t slot);

  // The records found at start: copies an unclean stop may have left behind
  // their peers.
  const std::vector<Copy>& leftover() const { return leftover_; }
  // A leftover copy is settled (recorded stale on M, or M keeps it as the
  // last current copy, or its file is gone): its record goes, unless the
  // copy was written since.
  void Settled(Handle h, uint32_t slot);

  // A clean stop: stops the flusher, syncs every copy with a record and drops
  // the records (after the last write: call once the data channels stopped).
  void Close();

  static constexpr int kIdleMs = 1000;  // a copy unwritten this long is synced by the flusher
  uint64_t records_written() const;     // counters (tests, the log)
  uint64_t records_dropped() const;

 private:
  struct Entry {
    bool durable = false;    // the record is on disk
    bool leftover = false;   // found at start and not settled yet: the flusher leaves it
    bool recording = false;  // a Begin is committing it
    int writing = 0;         // Writings alive
    uint64_t gen = 0;        // Begins so far
    Clock::time_point last;  // the last Begin
  };
  void End(Copy c);
  // Syncs the copies idle for at least idle_ms (all with 0) and drops their
  // records where no write began meanwhile.
  void Flush(int64_t idle_ms);
  void Run();  // the flusher

  RocksMetaStore* const meta_;
  CopyStores* const stores_;
  std::vector<Copy> leftover_;

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::map<Copy, Entry> entries_;
  bool stop_ = false;
  uint64_t written_ = 0, dropped_ = 0;
  std::thread flusher_;
};

}  // namespace clf::server
