#include "server/data/object_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <chrono>
#include <filesystem>

namespace clf::server {
namespace {

// Closes the descriptor when the last user drops it.
std::shared_ptr<int> MakeFd(int fd) {
  return std::shared_ptr<int>(new int(fd), [](int* p) {
    ::close(*p);
    delete p;
  });
}

constexpr int kFanout = 256;

// `data` to the extents of `fd` in order (each pwrite retried until whole).
Status WriteExtents(int fd, const std::vector<Extent>& extents, std::string_view data,
                    const char* what) {
  size_t pos = 0;
  for (const Extent& e : extents) {
    uint64_t done = 0;
    while (done < e.length) {
      ssize_t n = ::pwrite(fd, data.data() + pos + done, e.length - done,
                           static_cast<off_t>(e.offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return FromErrno(errno, what);
      }
      done += static_cast<uint64_t>(n);
    }
    pos += e.length;
  }
  return Status::Ok();
}

}  // namespace

Status ObjectStore::SyncData(int fd) {
  if (::fdatasync(fd) != 0) return FromErrno(errno, "fdatasync data object");
  syncs_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Result<std::unique_ptr<ObjectStore>> ObjectStore::Open(const std::string& dir,
                                                       uint64_t early_writeback_bytes,
                                                       uint64_t read_ahead_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("create " + dir + ": " + ec.message());
  for (int i = 0; i < kFanout; ++i) {
    char sub[8];
    std::snprintf(sub, sizeof(sub), "%02x", i);
    std::filesystem::create_directories(std::filesystem::path(dir) / sub, ec);
    if (ec) return IoError("create object folder: " + ec.message());
  }
  std::filesystem::create_directories(std::filesystem::path(dir) / "pool", ec);
  if (ec) return IoError("create object pool folder: " + ec.message());
  auto store = std::unique_ptr<ObjectStore>(new ObjectStore(dir));
  // Pool files left from before a restart are reused.
  if (DIR* d = ::opendir((dir + "/pool").c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      uint64_t n = std::strtoull(e->d_name, nullptr, 10);
      store->pool_.push_back(n);
      store->next_pool_ = std::max(store->next_pool_, n + 1);
    }
    ::closedir(d);
  }
  store->early_writeback_bytes_ = early_writeback_bytes;
  store->read_ahead_bytes_ = read_ahead_bytes;
  store->filler_ = std::thread([s = store.get()] { s->FillPool(); });
  store->writeback_ = std::thread([s = store.get()] { s->Writeback(); });
  return store;
}

ObjectStore::~ObjectStore() {
  {
    std::lock_guard<std::mutex> l(pool_mu_);
    stop_ = true;
  }
  pool_cv_.notify_all();
  if (filler_.joinable()) filler_.join();
  {
    std::lock_guard<std::mutex> l(wb_mu_);
    wb_stop_ = true;
  }
  wb_cv_.notify_all();
  if (writeback_.joinable()) writeback_.join();
}

void ObjectStore::Writeback() {
  std::unique_lock<std::mutex> l(wb_mu_);
  for (;;) {
    wb_cv_.wait(l, [this] { return wb_stop_ || !wb_queue_.empty(); });
    if (wb_stop_) return;
    std::vector<WritebackRange> batch;
    batch.swap(wb_queue_);
    l.unlock();
    for (const WritebackRange& r : batch) {
      // May block while the disk's queue is full: only this thread waits.
      (void)::sync_file_range(*r.fd, static_cast<off_t>(r.offset), static_cast<off_t>(r.length),
                              SYNC_FILE_RANGE_WRITE);
    }
    batch.clear();  // descriptors of removed objects close here, not under the lock
    l.lock();
  }
}

std::string ObjectStore::PoolPath(uint64_t n) const { return dir_ + "/pool/" + std::to_string(n); }

bool ObjectStore::TakeFromPool(uint64_t* n) {
  std::lock_guard<std::mutex> l(pool_mu_);
  if (pool_.empty()) return false;
  *n = pool_.back();
  pool_.pop_back();
  if (pool_.size() < kPoolLow) pool_cv_.notify_one();
  return true;
}

void ObjectStore::FillPool() {
  std::unique_lock<std::mutex> l(pool_mu_);
  while (!stop_) {
    pool_cv_.wait(l, [this] { return stop_ || pool_.size() < kPoolLow; });
    while (!stop_ && pool_.size() < kPoolFill) {
      uint64_t n = next_pool_++;
      l.unlock();
      int fd = ::open(PoolPath(n).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      l.lock();
      if (fd < 0) break;  // disk full or similar: Create falls back to open(O_CREAT)
      ::close(fd);
      pool_.push_back(n);
    }
    // Do not spin when creation fails: wait for the next take.
    pool_cv_.wait_for(l, std::chrono::seconds(1), [this] { return stop_; });
  }
}

std::string ObjectStore::PathOf(Handle h) const {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "/%02x/%016" PRIx64, static_cast<unsigned>(h % kFanout), h);
  return dir_ + buf;
}

Result<std::shared_ptr<int>> ObjectStore::Fd(Handle h, bool create) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = fds_.find(h);
    if (it != fds_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      return it->second.first;
    }
  }
  const std::string path = PathOf(h);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ENOENT && create) {
    // Objects are created lazily, on the first write: take a pre-created one from
    // the pool without replacing an object a concurrent writer just made.
    uint64_t n;
    if (TakeFromPool(&n) &&
        ::renameat2(AT_FDCWD, PoolPath(n).c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0 &&
        errno == EEXIST) {
      std::lock_guard<std::mutex> l(pool_mu_);
      pool_.push_back(n);
    }
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  }
  if (fd < 0) {
    if (errno == ENOENT) return Status(Code::kStale, "no data object for this file on this server");
    return FromErrno(errno, "open data object");
  }
  std::shared_ptr<int> sfd = MakeFd(fd);
  std::lock_guard<std::mutex> l(mu_);
  auto it = fds_.find(h);
  if (it != fds_.end()) return it->second.first;  // raced: keep the first
  lru_.push_front(h);
  fds_.emplace(h, std::make_pair(sfd, lru_.begin()));
  while (fds_.size() > kMaxOpen) {
    fds_.erase(lru_.back());
    lru_.pop_back();
  }
  return sfd;
}

void ObjectStore::Forget(Handle h) {
  {
    std::lock_guard<std::mutex> s(streams_mu_);
    read_ends_.erase(h);
  }
  std::lock_guard<std::mutex> l(mu_);
  direct_fds_.erase(h);
  auto it = fds_.find(h);
  if (it == fds_.end()) return;
  lru_.erase(it->second.second);
  fds_.erase(it);
}

Status ObjectStore::Create(Handle h) {
  Forget(h);
  uint64_t n;
  if (TakeFromPool(&n)) {
    if (::rename(PoolPath(n).c_str(), PathOf(h).c_str()) == 0) return Status::Ok();
    // The pool file vanished (removed by hand): fall through to a plain create.
  }
  int fd = ::open(PathOf(h).c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return FromErrno(errno, "create data object");
  ::close(fd);
  return Status::Ok();
}

Status ObjectStore::Remove(Handle h) {
  Forget(h);
  const std::string path = PathOf(h);
  // Only an object that never held data goes back to the pool. Emptying one
  // that did (truncate, then rename) could lose the truncate and keep the
  // rename at a power cut, and the next new file would read a removed
  // file's bytes (PowerLossTest.UnsyncedFilesNeverShowRemovedFilesBytes).
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && st.st_size == 0 && st.st_blocks == 0) {
    std::unique_lock<std::mutex> l(pool_mu_);
    if (pool_.size() < kPoolMax) {
      uint64_t n = next_pool_++;
      l.unlock();
      if (::rename(path.c_str(), PoolPath(n).c_str()) == 0) {
        l.lock();
        pool_.push_back(n);
        return Status::Ok();
      }
      if (errno == ENOENT) return Status::Ok();
    }
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return FromErrno(errno, "remove data object");
  }
  return Status::Ok();
}

bool ObjectStore::Exists(Handle h) const {
  struct stat st;
  return ::stat(PathOf(h).c_str(), &st) == 0;
}

Result<ObjectSize> ObjectStore::Size(Handle h) {
  struct stat st;
  if (::stat(PathOf(h).c_str(), &st) != 0) {
    if (errno == ENOENT) return ObjectSize{};
    return FromErrno(errno, "stat data object");
  }
  return ObjectSize{static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_blocks)};
}

Status ObjectStore::Truncate(Handle h, uint64_t size) {
  // Shrinking to nothing needs no object; anything else makes one (a sparse extension).
  if (size == 0 && !Exists(h)) return Status::Ok();
  CLF_ASSIGN_OR_RETURN(std::shared_ptr<int> fd, Fd(h, true));
  if (::ftruncate(*fd, static_cast<off_t>(size)) != 0) return FromErrno(errno, "truncate data object");
  return Status::Ok();
}

bool ObjectStore::WantsDirect(const std::vector<Extent>& extents) const {
  if (direct_write_bytes_ == 0 || direct_refused_.load(std::memory_order_relaxed)) return false;
  uint64_t total = 0;
  for (const Extent& e : extents) {
    if (e.offset % kDirectAlign != 0 || e.length % kDirectAlign != 0) return false;
    total += e.length;
  }
  return total >= direct_write_bytes_;
}

Result<std::shared_ptr<int>> ObjectStore::DirectFd(Handle h) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = direct_fds_.find(h);
    if (it != direct_fds_.end()) return it->second;
  }
  int fd = ::open(PathOf(h).c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) {
    if (errno == EINVAL) {
      direct_refused_.store(true, std::memory_order_relaxed);
      return Status(Code::kNotSupported, "the object store's file system refuses O_DIRECT");
    }
    if (errno == ENOENT) return Status(Code::kStale, "no data object for this file on this server");
    return FromErrno(errno, "open data object for direct writes");
  }
  std::shared_ptr<int> sfd = MakeFd(fd);
  std::lock_guard<std::mutex> l(mu_);
  if (direct_fds_.size() >= kMaxOpen) direct_fds_.clear();
  return direct_fds_.emplace(h, sfd).first->second;
}

Status ObjectStore::WriteDirect(Handle h, const std::vector<Extent>& extents, std::string_view data,
                                bool sync) {
  CLF_ASSIGN_OR_RETURN(std::shared_ptr<int> fd, DirectFd(h));
  CLF_RETURN_IF_ERROR(WriteExtents(*fd, extents, data, "write data object (direct)"));
  direct_writes_.fetch_add(1, std::memory_order_relaxed);
  return sync ? SyncData(*fd) : Status::Ok();
}

Status ObjectStore::Write(Handle h, const std::vector<Extent>& extents, std::string_view data,
                          bool sync) {
  CLF_ASSIGN_OR_RETURN(std::shared_ptr<int> fd, Fd(h, true));
  if (reinterpret_cast<uintptr_t>(data.data()) % kDirectAlign == 0 && WantsDirect(extents)) {
    Status d = WriteDirect(h, extents, data, sync);
    if (d.code() != Code::kNotSupported) return d;
  }
  CLF_RETURN_IF_ERROR(WriteExtents(*fd, extents, data, "write data object"));
  return AfterWrite(fd, extents, sync);
}

Result<std::shared_ptr<int>> ObjectStore::Descriptor(Handle h, bool create) {
  Result<std::shared_ptr<int>> fd = Fd(h, create);
  if (!fd.ok() && !create && fd.status().code() == Code::kStale) return std::shared_ptr<int>();
  return fd;
}

Status ObjectStore::AfterWrite(const std::shared_ptr<int>& fd, const std::vector<Extent>& extents,
                               bool sync) {
  if (sync) return SyncData(*fd);
  // Large writes start their writeback now (asynchronously: this only queues
  // the pages for the disk). Otherwise a big file's bytes sit dirty until the
  // client's fsync or close, which then waits for the whole file to reach the
  // disk instead of only its tail; the transfer and the disk now overlap.
  // Small writes are left to the kernel's flusher (a temporary file may be
  // gone before it would have been written).
  bool queued = false;
  {
    std::lock_guard<std::mutex> l(wb_mu_);
    for (const Extent& e : extents) {
      if (early_writeback_bytes_ == 0 || e.length < early_writeback_bytes_ ||
          wb_queue_.size() >= kWritebackQueue) {
        continue;
      }
      if (!wb_queue_.empty() && wb_queue_.back().fd == fd &&
          wb_queue_.back().offset + wb_queue_.back().length == e.offset) {
        wb_queue_.back().length += e.length;  // continues the last range
      } else {
        wb_queue_.push_back(WritebackRange{fd, e.offset, e.length});
      }
      queued = true;
      early_writebacks_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (queued) wb_cv_.notify_one();
  return Status::Ok();
}

Status ObjectStore::Read(Handle h, const std::vector<Extent>& extents, std::string* out) {
  uint64_t total = 0;
  for (const Extent& e : extents) total += e.length;
  // `out` may be a reused buffer: resizing it keeps its old bytes (no fill of
  // the whole range); every byte pread does not overwrite is zeroed below.
  out->resize(total);
  Result<std::shared_ptr<int>> fd = Fd(h, false);
  // No object: nothing was ever written to this server's stripe units (objects
  // are created on first write), so the whole range is a hole.
  if (!fd.ok()) {
    if (fd.status().code() != Code::kStale) return fd.status();
    std::memset(out->data(), 0, total);
    return Status::Ok();
  }
  // A large read belongs to a stream (NoteStreamRead): it reads through the
  // stream's own descriptor, and a lone stream's next bytes are asked from
  // the disk before this read's own pread, so the disk works on them while
  // this one travels.
  std::shared_ptr<int> rfd = *fd;
  if (total >= kReadAheadMin) {
    const uint64_t start = extents.front().offset;
    const uint64_t end = extents.back().offset + extents.back().length;
    const StreamRead sr = NoteStreamRead(h, start, end);
    if (sr.fd) rfd = sr.fd;
    if (sr.ahead_to > sr.ahead_from) {
      // The kernel allocates the pages and submits the reads, then returns.
      (void)::posix_fadvise(*rfd, static_cast<off_t>(sr.ahead_from),
                            static_cast<off_t>(sr.ahead_to - sr.ahead_from), POSIX_FADV_WILLNEED);
      read_aheads_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  size_t pos = 0;
  for (const Extent& e : extents) {
    uint64_t done = 0;
    while (done < e.length) {
      ssize_t n = ::pread(*rfd, out->data() + pos + done, e.length - done,
                          static_cast<off_t>(e.offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return FromErrno(errno, "read data object");
      }
      if (n == 0) {  // past the end: zeros
        std::memset(out->data() + pos + done, 0, e.length - done);
        break;
      }
      done += static_cast<uint64_t>(n);
    }
    pos += e.length;
  }
  return Status::Ok();
}

ObjectStore::StreamRead ObjectStore::NoteStreamRead(Handle h, uint64_t off, uint64_t end) {
  const auto now = std::chrono::steady_clock::now();
  // What to ask ahead of stream `s`, whose read ended at `end`: up to
  // read_ahead_bytes_ past it, less what was asked already; nothing while
  // another stream of the object is active (its reads came within
  // kStreamActive): concurrent streams keep the disk busy with their own
  // descriptors' readahead, and asks on top of it cost CPU (it is the
  // kernel's own readahead that allocates large folios; an ask fills the
  // cache a page at a time).
  auto ahead = [&](ReadStream& s, const std::vector<ReadStream>& all, StreamRead* r) {
    if (read_ahead_bytes_ == 0) return;
    for (const ReadStream& o : all) {
      if (&o != &s && now - o.last < kStreamActive) return;
    }
    const uint64_t from = std::max(end, s.ahead_end);
    const uint64_t to = end + read_ahead_bytes_;
    if (to <= from) return;
    s.ahead_end = to;
    r->ahead_from = from;
    r->ahead_to = to;
  };
  StreamRead r;
  {
    std::lock_guard<std::mutex> l(streams_mu_);
    auto it = read_ends_.find(h);
    if (it != read_ends_.end()) {
      for (ReadStream& s : it->second) {
        if (s.end == off) {
          s.end = end;
          s.last = now;
          r.fd = s.fd;
          ahead(s, it->second, &r);
          return r;
        }
      }
    }
  }
  // A new stream: its own descriptor (while fewer than kMaxStreamFds are
  // open), so the kernel's readahead state of it follows this stream alone.
  if (stream_fds_->load(std::memory_order_relaxed) < kMaxStreamFds) {
    int f = ::open(PathOf(h).c_str(), O_RDONLY | O_CLOEXEC);
    if (f >= 0) {
      stream_fds_->fetch_add(1, std::memory_order_relaxed);
      r.fd = std::shared_ptr<int>(new int(f), [count = stream_fds_](int* p) {
        ::close(*p);
        delete p;
        count->fetch_sub(1, std::memory_order_relaxed);
      });
    }
  }
  std::lock_guard<std::mutex> l(streams_mu_);
  if (read_ends_.size() >= kMaxOpen && read_ends_.find(h) == read_ends_.end()) read_ends_.clear();
  std::vector<ReadStream>& streams = read_ends_[h];
  if (streams.size() >= kReadStreams) streams.erase(streams.begin());
  streams.push_back(ReadStream{end, 0, now, r.fd});
  if (off == 0) ahead(streams.back(), streams, &r);  // a stream's start
  return r;
}

Status ObjectStore::Sync(Handle h) {
  Result<std::shared_ptr<int>> fd = Fd(h, false);
  if (!fd.ok()) return fd.status().code() == Code::kStale ? Status::Ok() : fd.status();
  CLF_RETURN_IF_ERROR(SyncData(**fd));
  // The object's name in its folder (a new object was renamed there from the
  // pool or created): fsync the folder so the entry survives a power loss.
  std::string path = PathOf(h);
  path.resize(path.rfind('/'));
  int dfd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return FromErrno(errno, "open object folder");
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0) return FromErrno(err, "fsync object folder");
  return Status::Ok();
}

std::vector<Handle> ObjectStore::List() const {
  std::vector<Handle> out;
  for (int i = 0; i < kFanout; ++i) {
    char sub[8];
    std::snprintf(sub, sizeof(sub), "/%02x", i);
    DIR* d = ::opendir((dir_ + sub).c_str());
    if (!d) continue;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      out.push_back(std::strtoull(e->d_name, nullptr, 16));
    }
    ::closedir(d);
  }
  return out;
}

std::vector<Handle> ObjectStore::ListFolder(uint32_t folder) const {
  static_assert(kFolders == kFanout);
  std::vector<Handle> out;
  if (folder >= kFolders) return out;
  char sub[8];
  std::snprintf(sub, sizeof(sub), "/%02x", folder);
  DIR* d = ::opendir((dir_ + sub).c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    out.push_back(std::strtoull(e->d_name, nullptr, 16));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

uint64_t ObjectStore::Count() const { return List().size(); }

uint64_t ObjectStore::BytesUsed() const {
  uint64_t total = 0;
  for (Handle h : List()) {
    struct stat st;
    if (::stat(PathOf(h).c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_blocks) * 512;
  }
  return total;
}

}  // namespace clf::server
