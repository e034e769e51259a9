// Per-mount state of clfmount: the client, the cache timeouts, the inode
// table, and the count of client calls still in flight (drained at unmount).
//
// One Mount per process; it is the fuse session's userdata and outlives the
// session loop and every completion (main drains before destroying it).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "client/include/clf/client.h"
#include "client/include/clf/lock_client.h"
#include "fuse/async_ns.h"
#include "fuse/fuse_ll.h"
#include "fuse/inode_table.h"
#include "fuse/mount_options.h"
#include "fuse/read_windows.h"
#include "fuse/statfs_cache.h"
#include "fuse/walk_cache.h"

namespace clf::fuse {

class Mount {
 public:
  explicit Mount(MountOptions options)
      : options_(options),
        walks_(std::chrono::duration_cast<WalkCache::Clock::duration>(
            std::chrono::duration<double>(options.entry_timeout))) {}
  Mount(const Mount&) = delete;
  Mount& operator=(const Mount&) = delete;

  // Set once, before the session loop starts (after daemonizing: gRPC threads
  // must not exist across fork).
  void set_client(std::unique_ptr<client::Client> c) { client_ = std::move(c); }
  void reset_client() {
    ns_.reset();
    client_.reset();
  }
  // Directory leases and deferred namespace changes; set with the client.
  void set_ns(std::unique_ptr<AsyncNs> ns) { ns_ = std::move(ns); }
  AsyncNs& ns() { return *ns_; }
  client::Client& client() { return *client_; }
  const MountOptions& options() const { return options_; }
  InodeTable& inodes() { return inodes_; }
  ReadWindows& windows() { return windows_; }
  WalkCache& walks() { return walks_; }
  StatFsCache& statfs() { return statfs_; }
  // FUSE_HANDLE_KILLPRIV_V2 is on (set by init): the mount clears setuid/
  // setgid and file capabilities on write and truncate (KillPrivBits).
  bool kill_priv() const { return kill_priv_.load(std::memory_order_acquire); }
  void set_kill_priv(bool on) { kill_priv_.store(on, std::memory_order_release); }
  // Parallel direct writes are on (set by init; MountOptions::parallel_writes).
  bool parallel_writes() const { return parallel_writes_.load(std::memory_order_acquire); }
  void set_parallel_writes(bool on) { parallel_writes_.store(on, std::memory_order_release); }
  // Direct-I/O opens may be mmapped (set by init: FUSE_DIRECT_IO_ALLOW_MMAP).
  bool direct_mmap() const { return direct_mmap_.load(std::memory_order_acquire); }
  void set_direct_mmap(bool on) { direct_mmap_.store(on, std::memory_order_release); }

  // The lock service client (ops_lock.cc) and the session for notifications,
  // set once before the session loop starts.
  void set_locks(std::unique_ptr<client::LockClient> l) { locks_ = std::move(l); }
  void reset_locks() { locks_.reset(); }
  bool has_locks() const { return locks_ != nullptr; }
  client::LockClient& locks() { return *locks_; }
  void set_session(fuse_session* se) { session_ = se; }
  fuse_session* session() const { return session_; }
  // A distinct fi->fh per open, so locks of an open file (OFD, flock) are known
  // at release. Multiples of 4: bits 0 and 1 are free for ops_file.cc (writer
  // open, direct read-only open).
  uint64_t NewFileHandle() { return next_fh_.fetch_add(1, std::memory_order_relaxed) << 2; }

  // Client calls in flight: each async call is counted before it starts and
  // uncounted when its completion has replied.
  void BeginCall() { inflight_.fetch_add(1, std::memory_order_relaxed); }
  void EndCall() {
    if (inflight_.fetch_sub(1, std::memory_order_acq_rel) == 1) inflight_.notify_all();
  }
  // Blocks until no completion is pending (every call has a deadline).
  void Drain() {
    for (uint64_t v = inflight_.load(); v != 0; v = inflight_.load()) inflight_.wait(v);
  }

 private:
  MountOptions options_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<AsyncNs> ns_;
  InodeTable inodes_;
  ReadWindows windows_;
  WalkCache walks_;
  StatFsCache statfs_{std::chrono::seconds(1)};
  std::unique_ptr<client::LockClient> locks_;
  fuse_session* session_ = nullptr;
  std::atomic<uint64_t> next_fh_{1};
  std::atomic<uint64_t> inflight_{0};
  std::atomic<bool> kill_priv_{false};
  std::atomic<bool> parallel_writes_{false};
  std::atomic<bool> direct_mmap_{false};
};

inline Mount& MountOf(fuse_req_t req) { return *static_cast<Mount*>(fuse_req_userdata(req)); }

// The table of low-level operations (ops_*.cc).
fuse_lowlevel_ops MakeOps();

}  // namespace clf::fuse
