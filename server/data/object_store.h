// ObjectStore: the data objects of one server, one local file per file handle,
// holding this server's stripe units densely packed.
// Thread safety: all methods are thread safe. Open descriptors are cached
// (bounded); a removed object's cached descriptor is dropped before unlink.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/extent.h"
#include "common/handle.h"
#include "common/status.h"

namespace clf::server {

struct ObjectSize {
  uint64_t size = 0;
  uint64_t blocks = 0;  // 512-byte blocks allocated
};

class ObjectStore {
 public:
  // early_writeback_bytes: see kEarlyWritebackBytes (0: no early writeback);
  // read_ahead_bytes: see kReadAheadBytes (0: no read-ahead of our own).
  static Result<std::unique_ptr<ObjectStore>> Open(const std::string& dir,
                                                   uint64_t early_writeback_bytes = kEarlyWritebackBytes,
                                                   uint64_t read_ahead_bytes = kReadAheadBytes);
  ~ObjectStore();

  // Creates an empty object (truncating an existing one: handles are never reused
  // for live files, so an existing object is a leftover of an interrupted create).
  Status Create(Handle h);
  // Removes the object; a missing object is not an error.
  Status Remove(Handle h);
  // Size and allocation of the object; a missing object reads as empty.
  Result<ObjectSize> Size(Handle h);
  Status Truncate(Handle h, uint64_t size);
  // Writes `data` to the extents in order, creating the object on first write
  // (from the pool when it has one).
  Status Write(Handle h, const std::vector<Extent>& extents, std::string_view data, bool sync);
  // Reads the extents into `out` (resized to the total); holes, bytes past the end
  // and a missing object (never written) read as zeros.
  Status Read(Handle h, const std::vector<Extent>& extents, std::string* out);
  Status Sync(Handle h);
  bool Exists(Handle h) const;
  // The zero-copy data path (transport::DataHandler::ObjectFd): the object's
  // cached descriptor, created on demand when `create`; without `create` a
  // missing object is a null pointer (it reads as zeros).
  Result<std::shared_ptr<int>> Descriptor(Handle h, bool create);
  // What Write does once the bytes are in `fd`: fdatasync when `sync`, else
  // the early writeback of large extents. For writes that put the bytes in
  // another way (splice).
  Status AfterWrite(const std::shared_ptr<int>& fd, const std::vector<Extent>& extents, bool sync);
  // Direct writes: a write of direct_write_bytes or more (the cluster file's
  // direct_write_kib; 0: never) whose extents start and end on kDirectAlign
  // goes to the disk with O_DIRECT, not through the page cache, when its
  // bytes start on kDirectAlign in memory. True when Write would take such a
  // write that way (the data channel then receives it into aligned memory).
  // Such a write costs no page-cache pages and no writeback later, and a
  // read of it afterwards comes from the disk (docs/ARCHITECTURE.md "Copies per
  // byte"). A file system that refuses O_DIRECT turns it off for good.
  bool WantsDirect(const std::vector<Extent>& extents) const;
  static constexpr uint64_t kDirectAlign = 4096;
  // Set before the store serves (not thread safe).
  void set_direct_write_bytes(uint64_t n) { direct_write_bytes_ = n; }
  uint64_t DirectWrites() const { return direct_writes_.load(std::memory_order_relaxed); }

  // Pre-created empty objects (objects/pool/): the first write (or Create) renames
  // one into place instead of allocating an inode on the data path; Remove truncates and
  // returns objects to the pool while it is below kPoolMax. A background thread
  // keeps at least kPoolLow ready. Pool files are not data objects (List skips them).
  static constexpr size_t kPoolLow = 1024;
  static constexpr size_t kPoolFill = 4096;
  static constexpr size_t kPoolMax = 16384;
  // Write (without sync) has the disk writeback of every extent at least this
  // long (the default; the cluster file's early_writeback_kib) started at
  // once (sync_file_range SYNC_FILE_RANGE_WRITE), by a background thread:
  // the request's thread does not wait when the disk's queue is full. At most
  // kWritebackQueue ranges wait; more are left to the kernel's flusher.
  static constexpr uint64_t kEarlyWritebackBytes = 256u << 10;
  static constexpr size_t kWritebackQueue = 4096;
  // Read streams: a read of kReadAheadMin bytes or more either continues a
  // stream of the object (starts where an earlier read of it ended) or
  // starts one (up to kReadStreams per object, oldest dropped first). Each
  // stream reads through a descriptor of its own (at most kMaxStreamFds in
  // the store; past that, the object's shared one), so the kernel's
  // readahead state follows that stream alone: several readers of one file,
  // as w2's four, would otherwise share one descriptor whose readahead
  // follows one stream at a time. A stream that is the object's only active
  // one (no other read within kStreamActive) and started at 0 or continues
  // also has the next read_ahead_bytes (default kReadAheadBytes; the cluster
  // file's read_ahead_kib) after its read asked from the disk
  // (POSIX_FADV_WILLNEED, only what was not asked already), so the disk
  // works on its next requests while this one travels. Counted by ReadAheads.
  static constexpr uint64_t kReadAheadBytes = 4u << 20;
  static constexpr uint64_t kReadAheadMin = 256u << 10;
  static constexpr size_t kReadStreams = 8;
  static constexpr int64_t kMaxStreamFds = 1024;
  static constexpr std::chrono::milliseconds kStreamActive{200};
  // Descriptors of read streams open now (tests).
  int64_t StreamDescriptors() const { return stream_fds_->load(std::memory_order_relaxed); }

  std::vector<Handle> List() const;
  // The data objects of one object folder (0..kFolders-1), sorted: fsck pages by folder.
  static constexpr uint32_t kFolders = 256;
  std::vector<Handle> ListFolder(uint32_t folder) const;
  uint64_t Count() const;
  uint64_t BytesUsed() const;
  // fdatasync calls on data objects (Sync, and writes asked to be synced).
  uint64_t Syncs() const { return syncs_.load(std::memory_order_relaxed); }
  // Read-aheads asked from the disk (tests).
  uint64_t ReadAheads() const { return read_aheads_.load(std::memory_order_relaxed); }
  // Extents whose early writeback Write queued (tests).
  uint64_t EarlyWritebacks() const { return early_writebacks_.load(std::memory_order_relaxed); }
  const std::string& dir() const { return dir_; }

 private:
  explicit ObjectStore(std::string dir) : dir_(std::move(dir)) {}
  std::string PathOf(Handle h) const;
  std::string PoolPath(uint64_t n) const;
  bool TakeFromPool(uint64_t* n);
  void FillPool();

  std::mutex pool_mu_;  // guards pool_, next_pool_, stop_
  std::condition_variable pool_cv_;
  std::vector<uint64_t> pool_;
  uint64_t next_pool_ = 0;
  bool stop_ = false;
  std::thread filler_;

  struct WritebackRange {
    std::shared_ptr<int> fd;
    uint64_t offset, length;
  };
  void Writeback();
  std::mutex wb_mu_;  // guards wb_queue_, wb_stop_
  std::condition_variable wb_cv_;
  std::vector<WritebackRange> wb_queue_;
  bool wb_stop_ = false;
  uint64_t early_writeback_bytes_ = kEarlyWritebackBytes;  // 0: off
  std::atomic<uint64_t> syncs_{0};
  uint64_t read_ahead_bytes_ = kReadAheadBytes;  // 0: off
  std::atomic<uint64_t> read_aheads_{0};
  std::atomic<uint64_t> early_writebacks_{0};
  // Read streams of each object, oldest first. At most kMaxOpen objects (all
  // of them dropped when more come).
  std::mutex streams_mu_;
  // Open stream descriptors (shared with their deleters).
  std::shared_ptr<std::atomic<int64_t>> stream_fds_ = std::make_shared<std::atomic<int64_t>>(0);
  struct ReadStream {
    uint64_t end = 0;          // where the stream's next read is expected
    uint64_t ahead_end = 0;    // how far read-ahead was asked
    std::chrono::steady_clock::time_point last;  // its last read
    std::shared_ptr<int> fd;   // the stream's own descriptor (may be null)
  };
  std::unordered_map<Handle, std::vector<ReadStream>> read_ends_;
  struct StreamRead {
    std::shared_ptr<int> fd;  // null: the object's shared descriptor
    uint64_t ahead_from = 0, ahead_to = 0;  // read-ahead to ask (empty: none)
  };
  // Records a read of [off, end) of h.
  StreamRead NoteStreamRead(Handle h, uint64_t off, uint64_t end);
  std::thread writeback_;
  uint64_t direct_write_bytes_ = 0;  // 0: off
  std::atomic<bool> direct_refused_{false};          // the file system refused O_DIRECT
  std::atomic<uint64_t> direct_writes_{0};
  // The object's O_DIRECT descriptor (the object exists); kNotSupported when
  // the file system refuses O_DIRECT.
  Result<std::shared_ptr<int>> DirectFd(Handle h);
  Status WriteDirect(Handle h, const std::vector<Extent>& extents, std::string_view data, bool sync);
  // fdatasync of an object's descriptor, counted in Syncs().
  Status SyncData(int fd);
  Result<std::shared_ptr<int>> Fd(Handle h, bool create);
  void Forget(Handle h);

  std::string dir_;
  mutable std::mutex mu_;  // guards fds_ and lru_
  std::unordered_map<Handle, std::pair<std::shared_ptr<int>, std::list<Handle>::iterator>> fds_;
  std::list<Handle> lru_;
  std::unordered_map<Handle, std::shared_ptr<int>> direct_fds_;  // guarded by mu_; cleared past kMaxOpen
  static constexpr size_t kMaxOpen = 512;
};

}  // namespace clf::server
