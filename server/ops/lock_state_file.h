// LockStateFile: the lock service's record of its incarnation on disk (a part
// of LockOps, server/ops/lock_ops.h; docs/locking.md "Server restart and
// reclaim"). One text file, replaced atomically (written to `<path>.tmp`,
// fsynced, renamed): "<epoch> idle" or "<epoch> used", the latter followed by
// "sessions <n> <id>..." (the sessions live at that write). A restart reads it
// to decide whether the previous incarnation's holders may reclaim.
//
// A failed write is logged (warn) and otherwise ignored: the next start then
// sees an older record.
//
// Thread safety: every method may be called from any thread; writes are
// serialized by mu_. Lock order: mu_ is taken before whatever `live_sessions`
// takes (the mutex of the session list it reads); nothing else under it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace clf::server {

// What the record said about the previous incarnation.
struct PreviousLockState {
  uint64_t epoch = 0;           // 0: no readable record
  bool used = false;            // it opened a session and did not stop cleanly without locks
  bool sessions_known = false;  // the record lists its live sessions (newer clfd)
  std::set<uint64_t> sessions;
};

class LockStateFile {
 public:
  // `path` empty: no file; Read finds nothing and the writes do nothing.
  LockStateFile(std::string path, uint64_t epoch) : path_(std::move(path)), epoch_(epoch) {}
  LockStateFile(const LockStateFile&) = delete;
  LockStateFile& operator=(const LockStateFile&) = delete;

  bool enabled() const { return !path_.empty(); }
  PreviousLockState Read() const;
  // "<epoch> idle".
  void WriteIdle();
  // "<epoch> used" and the ids `live_sessions` returns, called under mu_ so
  // that a later write never records an older list.
  void WriteUsed(const std::function<std::vector<uint64_t>()>& live_sessions);
  // A "used" record was written by this incarnation.
  bool marked_used() const { return marked_used_.load(); }

 private:
  void WriteText(const std::string& text) const;

  const std::string path_;
  const uint64_t epoch_;
  std::atomic<bool> marked_used_{false};
  std::mutex mu_;  // serializes writes
};

}  // namespace clf::server
