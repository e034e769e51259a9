// ObjectStore: the data objects of one server, one local file per file handle,
// holding this server's stripe units densely packed.
// Thread safety: all methods are thread safe. Open descriptors are cached
// (bounded); a removed object's cached descriptor is dropped before unlink.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <list>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/handle.h"
#include "common/status.h"

namespace clf::server {

struct LocalExtent {
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct ObjectSize {
  uint64_t size = 0;
  uint64_t blocks = 0;  // 512-byte blocks allocated
};

class ObjectStore {
 public:
  static Result<std::unique_ptr<ObjectStore>> Open(const std::string& dir);
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
  Status Write(Handle h, const std::vector<LocalExtent>& extents, std::string_view data, bool sync);
  // Reads the extents into `out` (resized to the total); holes, bytes past the end
  // and a missing object (never written) read as zeros.
  Status Read(Handle h, const std::vector<LocalExtent>& extents, std::string* out);
  Status Sync(Handle h);
  bool Exists(Handle h) const;

  // Pre-created empty objects (objects/pool/): the first write (or Create) renames
  // one into place instead of allocating an inode on the data path; Remove truncates and
  // returns objects to the pool while it is below kPoolMax. A background thread
  // keeps at least kPoolLow ready. Pool files are not data objects (List skips them).
  static constexpr size_t kPoolLow = 1024;
  static constexpr size_t kPoolFill = 4096;
  static constexpr size_t kPoolMax = 16384;

  std::vector<Handle> List() const;
  // The data objects of one object folder (0..kFolders-1), sorted: fsck pages by folder.
  static constexpr uint32_t kFolders = 256;
  std::vector<Handle> ListFolder(uint32_t folder) const;
  uint64_t Count() const;
  uint64_t BytesUsed() const;
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
  Result<std::shared_ptr<int>> Fd(Handle h, bool create);
  void Forget(Handle h);

  std::string dir_;
  mutable std::mutex mu_;  // guards fds_ and lru_
  std::unordered_map<Handle, std::pair<std::shared_ptr<int>, std::list<Handle>::iterator>> fds_;
  std::list<Handle> lru_;
  static constexpr size_t kMaxOpen = 512;
};

}  // namespace clf::server
