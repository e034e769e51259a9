// The inodes the kernel knows: lookup counts, open counts, layout and the
// largest file size this mount has seen.
//
// ino == clf Handle (FUSE_ROOT_ID == kRootHandle == 1), so no mapping table
// is needed; this table only holds what the handlers need between requests.
// An entry lives while its lookup count or its open count is above zero; the
// root is pinned.
//
// Thread safety: every method is thread safe (sharded mutexes). No method
// calls out (no RPC, no fuse_reply_*) while holding a shard lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "client/include/clf/client.h"

namespace clf::fuse {

class InodeTable {
 public:
  using Clock = std::chrono::steady_clock;

  // What read/write/fsync need of an open file.
  struct FileInfo {
    Layout layout;
    uint64_t known_size = 0;
  };

  InodeTable();

  // +1 lookup for attr.handle (before fuse_reply_entry/create); records the
  // layout and raises the known size to attr.size.
  void Ref(const client::Attr& attr);
  // +1 lookup for an inode this table knows, its attributes left as they
  // are; false if it does not know it.
  bool RefKnown(uint64_t ino);
  // Subtracts n lookups (forget, or an entry reply that failed).
  void Unref(uint64_t ino, uint64_t n);
  // Refreshes layout and known size of a known inode from a fresh Attr
  // (getattr, setattr); unknown inodes are ignored.
  void Update(const client::Attr& attr);

  // open/create: +1 open. Fails (nullopt) if the inode's layout is unknown.
  std::optional<FileInfo> Open(uint64_t ino);
  // open after the layout was fetched with GetAttr.
  FileInfo OpenWithAttr(const client::Attr& attr);
  // release: -1 open. Returns true if this was the last open of an orphaned
  // file: the caller must Destroy it.
  bool Release(uint64_t ino);
  // True while any file of this mount is open.
  bool AnyOpen() const { return open_total_.load(std::memory_order_acquire) > 0; }
  // After a remove/rename that left `ino` orphaned (nlink 0, data kept): if
  // the file is open here, marks it so the last release destroys it and
  // returns true; returns false if nobody has it open (destroy it now).
  bool MarkOrphanIfOpen(uint64_t ino);

  // A successful unlink or rename-over removed one name of `ino` (not kept as
  // an orphan). If that was its last link as far as this mount knows, the
  // inode is gone: the kernel may still send a setattr for it (writeback of
  // its times at eviction), which is then answered without an RPC.
  void NoteUnlinked(uint64_t ino);
  bool Gone(uint64_t ino) const;
  // True while `ino` is open on this mount.
  bool IsOpen(uint64_t ino) const;

  std::optional<FileInfo> GetFile(uint64_t ino) const;
  // A write ended at `end`: the file is at least that long.
  void NoteWriteEnd(uint64_t ino, uint64_t end);
  // Size reports to the metadata server (sizes live on M): the largest write
  // end not yet reported, taken (and cleared) by flush/fsync/release;
  // RestoreUnreported puts it back when the report failed.
  std::optional<uint64_t> TakeUnreported(uint64_t ino);
  bool HasUnreported(uint64_t ino) const;
  void RestoreUnreported(uint64_t ino, uint64_t end);
  // A size taken by TakeUnreported is on M (or kept with a file created here).
  void ReportDone(uint64_t ino);
  // The end of this mount's writes M may not know yet (unreported, or in a
  // report on its way), 0 if none: a size M gives is at least this.
  uint64_t SizeFloor(uint64_t ino) const;
  // True once after writes since the last call: the last writer's release asks
  // M to gather the exact size and allocation.
  bool TakeNeedsRefresh(uint64_t ino);
  // Close-to-open: true if `fresh` (from M at open) shows another size or
  // mtime than the kernel's cached pages correspond to, i.e. a change made
  // elsewhere. Records `fresh` either way (size set exactly).
  bool ChangedElsewhere(const client::Attr& fresh);
  // Attributes after a change this mount made itself (size report, setattr):
  // the cache corresponds to them.
  void NoteOwnChange(const client::Attr& attr);
  // Attribute changes this mount sends to M (setattr, truncate, kill-priv)
  // are counted per inode. A reply to a request sent before one of them
  // (a size report, which a close sends without the caller waiting) may
  // carry attributes from before it: NoteOwnChangeSince absorbs `attr` only
  // if no change was sent since ChangesSent returned `sent`, so an older
  // size or mode never replaces what the change set.
  uint64_t ChangesSent(uint64_t ino) const;
  void NoteChangeSent(uint64_t ino);
  void NoteOwnChangeSince(const client::Attr& attr, uint64_t sent);
  // A truncate of `ino` about to be sent to M. M keeps the largest write end
  // reported, so a report on its way must reach M first, and one sent later
  // must not carry a write end from before the truncate. In one step under
  // the table's lock (a close's report runs on another FUSE thread): if a
  // size report or another truncate of `ino` is on its way, keeps `retry` to
  // run once none is and returns nullopt; otherwise takes the unreported write
  // end (a truncate sets M's size exactly), counts the truncate as on its way
  // and returns its ticket for TruncateDone.
  struct TruncateTicket {
    bool counted = false;            // the table had the inode: TruncateDone ends it
    std::optional<uint64_t> taken;   // the write end taken, put back on failure
  };
  std::optional<TruncateTicket> BeginTruncate(uint64_t ino, std::function<void()> retry);
  // After the server's answer: `size` is the new size on success, nullopt on
  // failure (the taken end is put back as RestoreUnreported does). Runs what
  // waited for reports once none is on its way.
  void TruncateDone(uint64_t ino, const TruncateTicket& t, std::optional<uint64_t> size);

  // Negative cache for the security.capability xattr the kernel asks for on
  // every write(2): true if it is known absent (until `until`).
  bool CapabilityKnownAbsent(uint64_t ino) const;
  void SetCapabilityAbsent(uint64_t ino, Clock::time_point until);
  void ClearCapabilityAbsent(uint64_t ino);

  // True if the last Attr seen for `ino`, at most `horizon` ago, said it has
  // no extended attributes (getxattr/listxattr then need no RPC).
  bool NoXattrsKnown(uint64_t ino, Clock::duration horizon) const;
  // A setxattr on `ino` was sent: forget that it had none.
  void NoteXattrSet(uint64_t ino);

  // The permission attributes last seen for `ino` (any Attr absorbed by Ref,
  // Update, OpenWithAttr...), and when; the root directory is kept from its
  // first getattr on.
  struct Perm {
    uint32_t mode = 0;  // permission bits (07777)
    uint32_t uid = 0;
    uint32_t gid = 0;
    bool is_dir = false;
    uint32_t nlink = 0;
    Clock::time_point seen{};
  };
  std::optional<Perm> GetPerm(uint64_t ino) const;

  size_t size() const;  // entries held (tests, logs)

 private:
  struct Entry {
    uint64_t nlookup = 0;
    uint32_t open = 0;
    bool orphaned = false;
    bool gone = false;
    bool has_layout = false;
    bool is_dir = false;
    uint32_t nlink = 0;
    Layout layout;
    uint64_t known_size = 0;
    // Size and mtime the kernel's cached pages of this inode correspond to:
    // set when the entry is made, by this mount's own changes, and at each
    // open's revalidation; lookups and getattrs do not move them.
    bool cache_set = false;
    uint64_t cache_size = 0;
    client::Timespec cache_mtime;
    uint64_t unreported_end = 0;  // valid while `unreported`
    bool unreported = false;
    uint32_t reporting = 0;      // reports (TakeUnreported) and truncates on their way
    uint64_t reporting_end = 0;  // the largest end among them
    std::vector<std::function<void()>> after_reports;  // truncates waiting (BeginTruncate)
    bool needs_refresh = false;
    Clock::time_point cap_absent_until{};
    bool has_xattrs = true;
    // The last setxattr through this mount: attributes arriving later may be
    // from before it (a lease listing, a reply already on its way), so "no
    // xattrs" is not answered here for a while after it.
    Clock::time_point xattr_set{};
    Clock::time_point attr_seen{};
    uint32_t mode = 0, uid = 0, gid = 0;
    uint64_t changes_sent = 0;  // NoteChangeSent
  };
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<uint64_t, Entry> map;
  };
  static constexpr size_t kShards = 32;

  Shard& ShardOf(uint64_t ino) { return shards_[(ino ^ (ino >> 17)) % kShards]; }
  const Shard& ShardOf(uint64_t ino) const { return shards_[(ino ^ (ino >> 17)) % kShards]; }
  static void Absorb(const client::Attr& attr, Entry* e);
  static bool Dead(uint64_t ino, const Entry& e);
  // Raises the largest unreported write end to at least `end`.
  static void AddUnreported(uint64_t end, Entry* e);
  // Ends one report; returns the truncates that waited once none is left (run
  // it with the shard's lock released).
  static std::vector<std::function<void()>> EndReport(Entry* e);

  Shard shards_[kShards];
  std::atomic<uint64_t> open_total_{0};
};

}  // namespace clf::fuse
