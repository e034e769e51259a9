// libclf locks: a lock session over every server of a cluster (issue 8,
// docs/locking.md). No gRPC or protobuf types.
//
// A file's locks live on its metadata server (ServerOf(handle)). A LockClient
// holds one session per server it has locked on, opened on first use, each
// with a lease that a background thread renews every lease/3. If the process
// dies or is cut off, the lease runs out on the server and its locks are
// released. If a lease was lost anyway (a partition longer than the lease, or
// the server restarted), the server answers kStale; the LockClient then opens
// a new session for later calls, and the lost locks' Unlock also returns kStale:
// the caller learns its locks are gone instead of believing it holds them.
//
// Two lock spaces per file, which do not conflict with each other:
//   - list locks (Lock*, Unlock, Test): whole file, byte range, a list of exact
//     extents (granted all at once or not at all) or a compact strided pattern
//     expanded on the server; shared or exclusive; waiters are served FIFO.
//   - POSIX locks (PosixLock, PosixTest, PosixRelease): fcntl record locks per
//     owner (split/merge as Linux) and flock locks, for clfmount.
// `owner` names a lock holder inside this client: locks of one owner never
// conflict with each other (as in POSIX); use distinct owners for threads
// that must exclude each other.
//
// Thread safety: every method may be called from any thread. The blocking
// methods wait on the calling thread; the async ones run their callback
// exactly once on a library thread (or inline for argument errors).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "clf/client.h"
#include "common/config.h"
#include "common/handle.h"
#include "common/status.h"

namespace clf::client {

enum class LockMode : uint8_t { kShared, kExclusive };

// [offset, offset + length) of the file (common/extent.h); for LockRange a
// length of 0 means to the end of the file.
using LockExtent = Extent;

// One level of a nested strided pattern, outermost first: placed at base b a
// level emits for i in [0, count) the block [b + offset + i*stride, +block_length)
// (last level) or block_length consecutive copies of the next level placed at
// b + offset + i*stride + j*span(next) (docs/locking.md, StridedPattern).
struct LockPatternLevel {
  uint64_t offset = 0;
  uint64_t block_length = 1;
  uint64_t stride = 0;
  uint64_t count = 1;
};

// A granted list lock.
struct HeldLock {
  Handle handle = 0;
  uint64_t id = 0;
  uint64_t session = 0;
  uint64_t epoch = 0;
};

// How long a lock call may wait.
struct LockWait {
  bool wait = true;        // false: granted now or kWouldBlock
  uint32_t timeout_ms = 0; // with wait: kTimedOut after this; 0 = wait as long as it takes
};

// A lock that blocks a probed request.
struct LockConflict {
  bool conflict = false;
  uint64_t session = 0;
  uint64_t owner = 0;
  LockMode mode = LockMode::kShared;
  uint64_t offset = 0;
  uint64_t length = 0;  // POSIX: 0 = to the end of the file
  uint32_t pid = 0;     // POSIX: as the holder's mount reported it
  std::string client_name;
};

enum class PosixLockType : uint8_t { kRead, kWrite, kUnlock };
enum class FlockOp : uint8_t { kShared, kExclusive, kUnlock };

// One holder or waiter, as `clf locks` shows it.
struct LockHolderInfo {
  Handle handle = 0;
  uint64_t session = 0;
  std::string client_name, client_address;
  uint64_t owner = 0;
  std::string kind;  // whole, range, list, pattern, fcntl, flock
  LockMode mode = LockMode::kShared;
  bool waiting = false;
  std::vector<LockExtent> ranges;  // at most 64
  uint64_t extent_count = 0;
  uint64_t age_ms = 0;
  uint64_t lock_id = 0;
  uint32_t pid = 0;
};

struct LockListing {
  std::vector<LockHolderInfo> locks;
  uint64_t sessions = 0;  // open sessions on that server
};

struct LockClientOptions {
  uint32_t lease_ms = 0;         // 0: the server's default (15 s)
  std::string client_name;       // shown by `clf locks`; default host:pid
  uint32_t rpc_timeout_ms = 0;   // 0: the cluster file's rpc_timeout_ms
  std::string tls_cert, tls_key;  // credential overrides, as in ClientOptions
  std::string secret_file;
};

// A blocking call in flight that can be withdrawn (a FUSE interrupt).
class PendingLock {
 public:
  virtual ~PendingLock() = default;
  // Withdraws the request on the server; its callback then gets kCancelled
  // (or Ok if it was granted first). Safe to call at any time, more than once.
  virtual void Cancel() = 0;
};

class LockClient {
 public:
  static Result<std::unique_ptr<LockClient>> Open(const ClusterConfig& cluster,
                                                  LockClientOptions opts = {});
  // Closes every session (releasing its locks) and stops the renewal thread.
  virtual ~LockClient() = default;

  // ---- list locks (blocking) ----
  virtual Result<HeldLock> LockWholeFile(Handle h, LockMode mode, uint64_t owner,
                                         LockWait wait = {}) = 0;
  virtual Result<HeldLock> LockRange(Handle h, uint64_t offset, uint64_t length, LockMode mode,
                                     uint64_t owner, LockWait wait = {}) = 0;
  // All the extents at once (coalesced) or nothing.
  virtual Result<HeldLock> LockList(Handle h, const std::vector<LockExtent>& extents,
                                    LockMode mode, uint64_t owner, LockWait wait = {}) = 0;
  virtual Result<HeldLock> LockPattern(Handle h, const std::vector<LockPatternLevel>& pattern,
                                       LockMode mode, uint64_t owner, LockWait wait = {}) = 0;
  virtual Status Unlock(const HeldLock& lock) = 0;
  // The first granted list lock that blocks (extents, mode) for `owner`.
  virtual Result<LockConflict> TestList(Handle h, const std::vector<LockExtent>& extents,
                                        LockMode mode, uint64_t owner) = 0;

  // MPI-IO atomic mode: writes `data` to the listed extents (in list order,
  // data packed contiguously) under an exclusive list lock of exactly those
  // extents, and releases it; no other atomic access to an overlapping byte
  // interleaves with it. `layout` is the file's layout.
  virtual Status AtomicWriteList(Client& client, Handle h, const Layout& layout,
                                 const std::vector<LockExtent>& extents, const std::string& data,
                                 uint64_t owner, LockWait wait = {}) = 0;
  // The same for reads: the bytes of the extents in list order.
  virtual Result<std::string> AtomicReadList(Client& client, Handle h, const Layout& layout,
                                             const std::vector<LockExtent>& extents,
                                             uint64_t owner, LockWait wait = {}) = 0;

  // ---- POSIX locks (async, for clfmount) ----
  // fcntl F_SETLK / F_SETLKW (wait) of [start, start + length), length 0 = to EOF.
  // An unlock whose session was lost succeeds (the locks are gone already).
  virtual std::shared_ptr<PendingLock> PosixLock(Handle h, uint64_t owner, PosixLockType type,
                                                 uint64_t start, uint64_t length, bool wait,
                                                 uint32_t pid, StatusCallback cb) = 0;
  virtual std::shared_ptr<PendingLock> Flock(Handle h, uint64_t owner, FlockOp op, bool wait,
                                             uint32_t pid, StatusCallback cb) = 0;
  virtual void PosixTest(Handle h, uint64_t owner, PosixLockType type, uint64_t start,
                         uint64_t length, Callback<LockConflict> cb) = 0;
  // Close: drops the fcntl locks of `owners` (and with flock, their flock locks).
  virtual void PosixRelease(Handle h, std::vector<uint64_t> owners, bool flock,
                            StatusCallback cb) = 0;

  // ---- admin ----
  // Holders and waiters of `h` on its server (h = 0 with `server`: every file there).
  virtual Result<LockListing> ListLocks(Handle h, ServerId server) = 0;
  // Number of sessions this client opened that are still live (tests, status).
  virtual size_t open_sessions() const = 0;
};

}  // namespace clf::client
