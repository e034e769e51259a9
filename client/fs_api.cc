// The application API (clf/clf.hpp) over the internal Client: paths resolved
// by components from the root, opens counted on the metadata server as the
// mount counts them (fuse/ops_file.cc), permission checks with the handle's
// credentials, the size reported at close and fsync.
//
// Invariants: a File's size_ is never below the size its metadata server
// reported at open or at its last refresh, nor below the end of its own
// writes; unreported writes are exactly those after the last successful
// report. Lock order: FileSystem::State::mu and File::State::mu are never
// held together, and never across a server call.
#include <fcntl.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "clf/clf.hpp"
#include "clf/client.h"
#include "client/api_error.h"
#include "client/sync_call.h"
#include "common/config.h"
#include "common/layout.h"
#include "common/log.h"
#include "common/posix_access.h"
#include "common/status.h"

namespace clf::api {

using client::Attr;
using client::Caller;
using client::FileType;

struct FileSystem::State {
  std::unique_ptr<client::Client> client;
  std::mutex mu;
  Caller caller;       // guarded by mu
  mode_t umask = 022;  // guarded by mu

  Caller CallerNow() {
    std::lock_guard<std::mutex> l(mu);
    return caller;
  }
  mode_t UmaskNow() {
    std::lock_guard<std::mutex> l(mu);
    return umask;
  }
};

struct File::State {
  std::shared_ptr<FileSystem::State> fs;
  Caller caller;  // the credentials at open
  Handle handle = 0;
  Layout layout;
  bool readable = false, writable = false, sync_writes = false;
  std::atomic<bool> open{true};
  // What this open's first write clears first, as the kernel's
  // file_remove_privs through the mount (client::kKillSuidGid, kKillCaps);
  // 0 once cleared or when there is nothing to clear.
  std::atomic<uint32_t> kill_bits{0};

  std::mutex mu;
  uint64_t size = 0;       // guarded by mu: see the invariants above
  uint64_t write_end = 0;  // guarded by mu: end of this open's writes
  uint64_t writes = 0;     // guarded by mu: writes noted so far
  uint64_t reported = 0;   // guarded by mu: `writes` at the last successful report

  client::Client& c() { return *fs->client; }
  void NoteWrite(uint64_t end) {
    std::lock_guard<std::mutex> l(mu);
    write_end = std::max(write_end, end);
    size = std::max(size, end);
    ++writes;
  }
  uint64_t Size() {
    std::lock_guard<std::mutex> l(mu);
    return size;
  }
  // M's size (a GetAttr or a report's answer) merged with this open's writes.
  uint64_t Refreshed(uint64_t m_size) {
    std::lock_guard<std::mutex> l(mu);
    size = std::max(m_size, write_end);
    return size;
  }
};

namespace {

using client::Wait;

int Fail(int err, std::string msg) { return client::ApiFail(err, std::move(msg)); }
int Fail(const Status& s) { return Fail(ToErrno(s), s.ToString()); }

// Runs a public call: no exception leaves the library.
template <typename T, typename F>
T Guarded(F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Fail(ENOMEM, "out of memory");
  } catch (const std::exception& e) {
    return Fail(EIO, std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail(EIO, "internal error");
  }
}

// libclf logs through spdlog's default logger. A program that set up its own
// keeps it; otherwise warnings and errors go to stderr (CLF_LOG_LEVEL: another level).
void InitLogOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!spdlog::default_logger()->name().empty()) return;
    const char* env = std::getenv("CLF_LOG_LEVEL");
    auto logger = std::make_shared<spdlog::logger>(
        "libclf", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %L %n[%P] %s:%# %v");
    logger->set_level(spdlog::level::from_str(env != nullptr ? env : "warn"));
    spdlog::set_default_logger(std::move(logger));
  });
}

Caller ProcessCaller() {
  Caller c;
  c.uid = static_cast<uint32_t>(::geteuid());
  c.gid = static_cast<uint32_t>(::getegid());
  const int n = ::getgroups(0, nullptr);
  if (n > 0) {
    std::vector<gid_t> g(static_cast<size_t>(n));
    const int got = ::getgroups(n, g.data());
    for (int i = 0; i < got; ++i)
      c.groups.push_back(static_cast<uint32_t>(g[static_cast<size_t>(i)]));
  }
  return c;
}

// An absolute path split into its directory and last name ("/" has no name).
struct PathParts {
  std::string dir;
  std::string name;
};

Result<PathParts> SplitPath(const std::string& path) {
  if (path.empty() || path[0] != '/') return Invalid("path must be absolute: '" + path + "'");
  if (path.find('\0') != std::string::npos) return Invalid("path holds a NUL byte");
  if (path == ".." || path.find("/../") != std::string::npos ||
      (path.size() >= 3 && path.compare(path.size() - 3, 3, "/..") == 0)) {
    return Invalid("'..' is not supported in paths: '" + path + "'");
  }
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  PathParts out{p.substr(0, slash == 0 ? 1 : slash), p.substr(slash + 1)};
  if (out.name == ".") return Invalid("path ends in '.': '" + path + "'");
  return out;
}

// The directory a new or removed name lives in.
Result<Attr> ResolveDir(client::Client& c, const PathParts& parts, const Caller& caller) {
  CLF_ASSIGN_OR_RETURN(Attr dir, c.ResolvePath(parts.dir, caller));
  if (dir.type != FileType::kDirectory)
    return Status(Code::kNotDir, "not a directory: " + parts.dir);
  return dir;
}

mode_t TypeBits(FileType t) {
  switch (t) {
    case FileType::kRegular:
      return S_IFREG;
    case FileType::kDirectory:
      return S_IFDIR;
    case FileType::kSymlink:
      return S_IFLNK;
    case FileType::kFifo:
      return S_IFIFO;
    case FileType::kSocket:
      return S_IFSOCK;
    case FileType::kChar:
      return S_IFCHR;
    case FileType::kBlock:
      return S_IFBLK;
    case FileType::kUnknown:
      break;
  }
  return 0;
}

void FillStat(const Attr& a, struct stat* st) {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = static_cast<ino_t>(a.handle);
  st->st_mode = TypeBits(a.type) | static_cast<mode_t>(a.mode & 07777);
  st->st_nlink = a.nlink;
  st->st_uid = a.uid;
  st->st_gid = a.gid;
  st->st_rdev = static_cast<dev_t>(a.rdev);
  st->st_size = static_cast<off_t>(a.size);
  st->st_blocks = static_cast<blkcnt_t>(a.blocks);
  // As the mount: one stripe unit, within [4 KiB, 1 MiB].
  st->st_blksize = std::min<uint32_t>(std::max<uint32_t>(a.layout.stripe_size, 4096), 1u << 20);
  st->st_atim.tv_sec = a.atime.sec;
  st->st_atim.tv_nsec = a.atime.nsec;
  st->st_mtim.tv_sec = a.mtime.sec;
  st->st_mtim.tv_nsec = a.mtime.nsec;
  st->st_ctim.tv_sec = a.ctime.sec;
  st->st_ctim.tv_nsec = a.ctime.nsec;
}

bool Allowed(const Caller& c, const Attr& a, uint32_t mask) {
  return MayAccess(a.mode, a.uid, a.gid, a.type == FileType::kDirectory, c.uid, c.gid, c.groups,
                   mask);
}

// What an open of a non-regular file answers.
Status NotRegular(const Attr& a, const std::string& path) {
  switch (a.type) {
    case FileType::kRegular:
      return Status::Ok();
    case FileType::kDirectory:
      return Status(Code::kIsDir, "is a directory: " + path);
    case FileType::kSymlink:
      return Status(Code::kLoop, "a symbolic link (not followed): " + path);
    default:
      return Invalid("not a regular file: " + path);
  }
}

constexpr int kIgnoredFlags =
    O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOATIME | O_LARGEFILE | O_NOFOLLOW;
constexpr int kKnownFlags =
    O_ACCMODE | O_CREAT | O_EXCL | O_TRUNC | O_SYNC | O_DSYNC | kIgnoredFlags;

// Ends a writer's open on M (after a failed open). Best effort: M forgets a
// writer whose client is gone anyway.
void UndoWriter(client::Client& c, Handle h, const Caller& caller) {
  client::ReportWriteArgs a;
  a.writers_delta = -1;
  c.ReportWriteSync(h, a, caller).IgnoreError();
}

// Opens the existing or new file `attr` (created: this open is already
// counted as a writer when it writes): permission, the writer's count, O_TRUNC.
Result<Attr> OpenExisting(client::Client& c, Attr attr, bool created, int flags,
                          const Caller& caller, const std::string& path) {
  CLF_RETURN_IF_ERROR(NotRegular(attr, path));
  const int acc = flags & O_ACCMODE;
  const bool writable = acc != O_RDONLY;
  if (created) return attr;
  const uint32_t mask = acc == O_WRONLY ? kMayWrite
                        : acc == O_RDWR ? kMayRead | kMayWrite
                                        : kMayRead;
  if (!Allowed(caller, attr, mask)) return Status(Code::kPermission, "permission denied: " + path);
  if (!writable) return attr;
  // M counts the writer and checks the write permission itself; its answer
  // is the file's current size.
  client::ReportWriteArgs w;
  w.writers_delta = +1;
  CLF_ASSIGN_OR_RETURN(attr, c.ReportWriteSync(attr.handle, w, caller));
  if ((flags & O_TRUNC) != 0 && attr.size > 0) {
    client::SetAttrArgs t;
    t.valid = client::kSetSize;
    t.size = 0;
    Result<Attr> r = c.SetAttrSync(attr.handle, t, caller);
    if (!r.ok()) {
      UndoWriter(c, attr.handle, caller);
      return r.status();
    }
    attr = *r;
  }
  return attr;
}

// Checks an offset and a byte count of a data call.
Status CheckRange(int64_t offset, uint64_t count) {
  if (offset < 0) return Invalid("negative offset " + std::to_string(offset));
  if (count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - offset)) {
    return Invalid("offset + count overflows");
  }
  if (static_cast<uint64_t>(offset) + count > kMaxFileSize) {
    return Status(Code::kFileTooBig, "past the maximum file size (2^60 bytes)");
  }
  return Status::Ok();
}

// The two lists of a list call, checked: the file list as extents, the bytes in all.
struct Lists {
  std::vector<client::FileExtent> extents;
  uint64_t bytes = 0;
  uint64_t end = 0;  // largest end of a non-empty segment
};

Result<Lists> CheckLists(const struct iovec* iov, int iovcnt, const Segment* segs, int nsegs) {
  if (iovcnt < 0 || nsegs < 0) return Invalid("negative list length");
  if ((iovcnt > 0 && iov == nullptr) || (nsegs > 0 && segs == nullptr)) {
    return Invalid("NULL list with a nonzero length");
  }
  if (static_cast<size_t>(iovcnt) > kMaxExtents || static_cast<size_t>(nsegs) > kMaxExtents) {
    return Status(Code::kTooBig, "more than 2^20 list entries");
  }
  uint64_t mem = 0;
  for (int i = 0; i < iovcnt; ++i) {
    const size_t len = iov[i].iov_len;
    if (len > 0 && iov[i].iov_base == nullptr) {
      return Invalid("memory piece " + std::to_string(i) + " is NULL");
    }
    if (len > std::numeric_limits<uint64_t>::max() - mem)
      return Invalid("memory list length overflows");
    mem += len;
  }
  Lists out;
  out.extents.reserve(static_cast<size_t>(nsegs));
  for (int i = 0; i < nsegs; ++i) {
    const Segment& s = segs[i];
    if (s.length < 0) return Invalid("segment " + std::to_string(i) + " has a negative length");
    Status r = CheckRange(s.offset, static_cast<uint64_t>(s.length));
    if (!r.ok()) return r.WithContext("segment " + std::to_string(i));
    const uint64_t len = static_cast<uint64_t>(s.length);
    if (len > std::numeric_limits<uint64_t>::max() - out.bytes)
      return Invalid("file list length overflows");
    out.bytes += len;
    if (len > 0) out.end = std::max(out.end, static_cast<uint64_t>(s.offset) + len);
    out.extents.push_back(client::FileExtent{static_cast<uint64_t>(s.offset), len});
  }
  if (mem != out.bytes) {
    return Invalid("memory list holds " + std::to_string(mem) + " bytes, file list " +
                   std::to_string(out.bytes));
  }
  if (out.bytes > client::kMaxListIoBytes)
    return Status(Code::kTooBig, "list call of more than 1 GiB");
  return out;
}

Status CheckOpen(File::State& s) {
  if (!s.open.load()) return Status(Code::kBadFd, "file is closed");
  return Status::Ok();
}

// Tells M the end of the writes not reported yet (and `delta` to its writer
// count); refresh: exact size and allocation gathered from the data servers.
Status Report(File::State& s, int32_t delta, bool refresh) {
  uint64_t end, writes;
  bool wrote;
  {
    std::lock_guard<std::mutex> l(s.mu);
    end = s.write_end;
    writes = s.writes;
    wrote = s.writes != s.reported;
  }
  if (!wrote && delta == 0) return Status::Ok();
  client::ReportWriteArgs a;
  a.wrote = wrote;
  a.size = end;
  a.writers_delta = delta;
  a.refresh = refresh && wrote;
  CLF_ASSIGN_OR_RETURN(Attr attr, s.c().ReportWriteSync(s.handle, a, s.caller));
  std::lock_guard<std::mutex> l(s.mu);
  s.reported = std::max(s.reported, writes);
  s.size = std::max(attr.size, s.write_end);
  return Status::Ok();
}

// Before the first write of an open: clears what a write clears (setuid,
// setgid, the file capability) on the metadata server.
Status KillPrivOnce(File::State& s) {
  const uint32_t bits = s.kill_bits.exchange(0);
  if (bits == 0) return Status::Ok();
  client::SetAttrArgs a;
  a.valid = bits | client::kSetViaOpenFile;
  Result<Attr> r = s.c().SetAttrSync(s.handle, a, s.caller);
  if (!r.ok()) {
    s.kill_bits |= bits;  // the next write tries again
    return r.status();
  }
  return Status::Ok();
}

// After a write of an O_SYNC/O_DSYNC open: the size known and everything durable.
Status SyncIfAsked(File::State& s) {
  if (!s.sync_writes) return Status::Ok();
  CLF_RETURN_IF_ERROR(Report(s, 0, false));
  return s.c().SyncSync(s.handle, s.layout);
}

}  // namespace

// ---- FileSystem

FileSystem::FileSystem(std::shared_ptr<State> state) : state_(std::move(state)) {}
FileSystem::~FileSystem() = default;

int FileSystem::Connect(const std::string& cluster_file, std::unique_ptr<FileSystem>* fs) {
  return Guarded<int>([&]() -> int {
    if (fs == nullptr) return Fail(EINVAL, "connect: NULL result pointer");
    InitLogOnce();
    Result<std::unique_ptr<client::Client>> c = client::Client::Open(cluster_file);
    if (!c.ok()) return Fail(c.status().WithContext("connect " + cluster_file));
    auto state = std::make_shared<State>();
    state->client = std::move(*c);
    state->caller = ProcessCaller();
    fs->reset(new FileSystem(std::move(state)));
    return 0;
  });
}

int FileSystem::SetCredentials(uint32_t uid, uint32_t gid, const std::vector<uint32_t>& groups) {
  return Guarded<int>([&]() -> int {
    if (::geteuid() != 0) return Fail(EPERM, "only root may act with other credentials");
    std::lock_guard<std::mutex> l(state_->mu);
    state_->caller = Caller{uid, gid, groups};
    return 0;
  });
}

mode_t FileSystem::Umask(mode_t mask) {
  std::lock_guard<std::mutex> l(state_->mu);
  const mode_t old = state_->umask;
  state_->umask = mask & 0777;
  return old;
}

int FileSystem::Open(const std::string& path, int flags, mode_t mode, std::unique_ptr<File>* file) {
  return Guarded<int>([&]() -> int {
    if (file == nullptr) return Fail(EINVAL, "open: NULL result pointer");
    if ((flags & ~kKnownFlags) != 0) {
      return Fail(EINVAL, "open: unsupported flags " + std::to_string(flags & ~kKnownFlags));
    }
    const int acc = flags & O_ACCMODE;
    if (acc != O_RDONLY && acc != O_WRONLY && acc != O_RDWR)
      return Fail(EINVAL, "open: bad access mode");
    if ((flags & O_TRUNC) != 0 && acc == O_RDONLY)
      return Fail(EINVAL, "open: O_TRUNC with O_RDONLY");
    const bool writable = acc != O_RDONLY;
    Result<PathParts> parts = SplitPath(path);
    if (!parts.ok()) return Fail(parts.status());
    client::Client& c = *state_->client;
    const Caller caller = state_->CallerNow();
    Result<Attr> attr = Status(Code::kInternal, "unset");
    if ((flags & O_CREAT) != 0) {
      if (parts->name.empty()) return Fail(EISDIR, "open: '/' is a directory");
      Result<Attr> dir = ResolveDir(c, *parts, caller);
      if (!dir.ok()) return Fail(dir.status().WithContext("open " + path));
      client::CreateArgs a;
      a.type = FileType::kRegular;
      a.mode = static_cast<uint32_t>(mode & ~state_->UmaskNow() & 07777);
      a.exclusive = (flags & O_EXCL) != 0;
      a.open_for_write = writable;
      Result<Attr> r = c.CreateSync(dir->handle, parts->name, a, caller);
      if (!r.ok()) return Fail(r.status().WithContext("open " + path));
      attr = OpenExisting(c, *r, !r->existed, flags, caller, path);
    } else {
      Result<Attr> r = c.ResolvePath(path, caller);
      if (!r.ok()) return Fail(r.status().WithContext("open " + path));
      attr = OpenExisting(c, *r, false, flags, caller, path);
    }
    if (!attr.ok()) return Fail(attr.status());
    auto s = std::make_unique<File::State>();
    s->fs = state_;
    s->caller = caller;
    s->handle = attr->handle;
    s->layout = attr->layout;
    s->readable = acc != O_WRONLY;
    s->writable = writable;
    s->sync_writes = (flags & (O_SYNC | O_DSYNC)) != 0;
    s->size = attr->size;
    if (writable) {
      // As the mount (fuse/ops_util.cc KillPrivBits): a file capability may
      // be there unless the server says the file has no extended
      // attributes; the setuid/setgid rule is the server's, asked only
      // when such a bit is set and the caller is not root.
      uint32_t bits = attr->has_xattrs ? uint32_t{client::kKillCaps} : 0u;
      if (caller.uid != 0 && (attr->mode & (S_ISUID | S_ISGID)) != 0) bits |= client::kKillSuidGid;
      s->kill_bits = bits;
    }
    file->reset(new File(std::move(s)));
    return 0;
  });
}

int FileSystem::Stat(const std::string& path, struct stat* st) {
  return Guarded<int>([&]() -> int {
    if (st == nullptr) return Fail(EINVAL, "stat: NULL stat buffer");
    Result<PathParts> parts = SplitPath(path);
    if (!parts.ok()) return Fail(parts.status());
    Result<Attr> a = state_->client->ResolvePath(path, state_->CallerNow());
    if (!a.ok()) return Fail(a.status().WithContext("stat " + path));
    FillStat(*a, st);
    return 0;
  });
}

namespace {

int RemoveName(FileSystem::State& fs, const std::string& path, bool directory) {
  const char* what = directory ? "rmdir " : "unlink ";
  Result<PathParts> parts = SplitPath(path);
  if (!parts.ok()) return Fail(parts.status());
  if (parts->name.empty()) return Fail(directory ? EBUSY : EISDIR, what + path);
  const Caller caller = fs.CallerNow();
  Result<Attr> dir = ResolveDir(*fs.client, *parts, caller);
  if (!dir.ok()) return Fail(dir.status().WithContext(what + path));
  Result<client::RemoveResult> r =
      fs.client->RemoveSync(dir->handle, parts->name, directory, caller);
  if (!r.ok()) return Fail(r.status().WithContext(what + path));
  return 0;
}

}  // namespace

int FileSystem::Unlink(const std::string& path) {
  return Guarded<int>([&]() -> int { return RemoveName(*state_, path, false); });
}

int FileSystem::Rmdir(const std::string& path) {
  return Guarded<int>([&]() -> int { return RemoveName(*state_, path, true); });
}

int FileSystem::Mkdir(const std::string& path, mode_t mode) {
  return Guarded<int>([&]() -> int {
    Result<PathParts> parts = SplitPath(path);
    if (!parts.ok()) return Fail(parts.status());
    if (parts->name.empty()) return Fail(EEXIST, "mkdir: '/' exists");
    const Caller caller = state_->CallerNow();
    Result<Attr> dir = ResolveDir(*state_->client, *parts, caller);
    if (!dir.ok()) return Fail(dir.status().WithContext("mkdir " + path));
    client::CreateArgs a;
    a.type = FileType::kDirectory;
    a.mode = static_cast<uint32_t>(mode & ~state_->UmaskNow() & 07777);
    a.exclusive = true;
    Result<Attr> r = state_->client->CreateSync(dir->handle, parts->name, a, caller);
    if (!r.ok()) return Fail(r.status().WithContext("mkdir " + path));
    return 0;
  });
}

// ---- File

File::File(std::unique_ptr<State> state) : state_(std::move(state)) {}

File::~File() {
  if (state_ != nullptr && state_->open.load()) Close();
}

int64_t File::Pread(void* buf, size_t count, int64_t offset) {
  return Guarded<int64_t>([&]() -> int64_t {
    State& s = *state_;
    if (Status o = CheckOpen(s); !o.ok()) return Fail(o);
    if (!s.readable) return Fail(EBADF, "pread: not open for reading");
    if (buf == nullptr && count > 0) return Fail(EINVAL, "pread: NULL buffer");
    if (Status r = CheckRange(offset, count); !r.ok()) return Fail(r.WithContext("pread"));
    if (count == 0) return 0;
    const uint64_t off = static_cast<uint64_t>(offset);
    uint64_t size = s.Size();
    if (off + count > size) {  // maybe grown by others since the open
      Result<Attr> a = s.c().GetAttrSync(s.handle, s.caller);
      if (!a.ok()) return Fail(a.status().WithContext("pread"));
      size = s.Refreshed(a->size);
    }
    if (off >= size) return 0;
    const uint64_t n = std::min<uint64_t>(count, size - off);
    char* out = static_cast<char*>(buf);
    for (uint64_t done = 0; done < n;) {
      const uint64_t len = std::min<uint64_t>(n - done, kMaxIoBytes);
      Result<std::string> r = s.c().ReadSync(s.handle, s.layout, off + done, len);
      if (!r.ok()) {
        if (done > 0) return static_cast<int64_t>(done);
        return Fail(r.status().WithContext("pread"));
      }
      std::memcpy(out + done, r->data(), len);
      done += len;
    }
    return static_cast<int64_t>(n);
  });
}

int64_t File::Pwrite(const void* buf, size_t count, int64_t offset) {
  return Guarded<int64_t>([&]() -> int64_t {
    State& s = *state_;
    if (Status o = CheckOpen(s); !o.ok()) return Fail(o);
    if (!s.writable) return Fail(EBADF, "pwrite: not open for writing");
    if (buf == nullptr && count > 0) return Fail(EINVAL, "pwrite: NULL buffer");
    if (Status r = CheckRange(offset, count); !r.ok()) return Fail(r.WithContext("pwrite"));
    if (count == 0) return 0;
    if (Status k = KillPrivOnce(s); !k.ok()) return Fail(k.WithContext("pwrite"));
    const uint64_t off = static_cast<uint64_t>(offset);
    const char* in = static_cast<const char*>(buf);
    uint64_t done = 0;
    while (done < count) {
      const uint64_t len = std::min<uint64_t>(count - done, kMaxIoBytes);
      Result<uint64_t> w = Wait<uint64_t>([&](client::Callback<uint64_t> cb) {
        s.c().Write(s.handle, s.layout, off + done, std::string(in + done, len), std::move(cb));
      });
      if (!w.ok()) {
        if (done == 0) return Fail(w.status().WithContext("pwrite"));
        break;  // a short write: what went before is written
      }
      done += len;
    }
    s.NoteWrite(off + done);
    if (Status y = SyncIfAsked(s); !y.ok()) return Fail(y.WithContext("pwrite (O_SYNC)"));
    return static_cast<int64_t>(done);
  });
}

int64_t File::WriteList(const struct iovec* iov, int iovcnt, const Segment* segs, int nsegs) {
  return Guarded<int64_t>([&]() -> int64_t {
    State& s = *state_;
    if (Status o = CheckOpen(s); !o.ok()) return Fail(o);
    if (!s.writable) return Fail(EBADF, "write list: not open for writing");
    Result<Lists> lists = CheckLists(iov, iovcnt, segs, nsegs);
    if (!lists.ok()) return Fail(lists.status().WithContext("write list"));
    if (lists->bytes == 0) return 0;
    if (Status k = KillPrivOnce(s); !k.ok()) return Fail(k.WithContext("write list"));
    std::string data;
    data.reserve(lists->bytes);
    for (int i = 0; i < iovcnt; ++i) {
      data.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    }
    Result<uint64_t> w =
        s.c().WriteListSync(s.handle, s.layout, std::move(lists->extents), std::move(data));
    if (!w.ok()) return Fail(w.status().WithContext("write list"));
    s.NoteWrite(lists->end);
    if (Status y = SyncIfAsked(s); !y.ok()) return Fail(y.WithContext("write list (O_SYNC)"));
    return static_cast<int64_t>(lists->bytes);
  });
}

int64_t File::ReadList(const struct iovec* iov, int iovcnt, const Segment* segs, int nsegs) {
  return Guarded<int64_t>([&]() -> int64_t {
    State& s = *state_;
    if (Status o = CheckOpen(s); !o.ok()) return Fail(o);
    if (!s.readable) return Fail(EBADF, "read list: not open for reading");
    Result<Lists> lists = CheckLists(iov, iovcnt, segs, nsegs);
    if (!lists.ok()) return Fail(lists.status().WithContext("read list"));
    if (lists->bytes == 0) return 0;
    uint64_t size = s.Size();
    if (lists->end > size) {
      Result<Attr> a = s.c().GetAttrSync(s.handle, s.caller);
      if (!a.ok()) return Fail(a.status().WithContext("read list"));
      size = s.Refreshed(a->size);
    }
    const std::vector<client::FileExtent> extents = lists->extents;
    Result<std::string> r = s.c().ReadListSync(s.handle, s.layout, std::move(lists->extents));
    if (!r.ok()) return Fail(r.status().WithContext("read list"));
    if (r->size() != lists->bytes) return Fail(EIO, "read list: short answer");
    // Bytes at or past the end of file read as zeros, whatever an object holds there.
    uint64_t within = 0, pos = 0;
    for (const client::FileExtent& e : extents) {
      const uint64_t in = e.offset >= size ? 0 : std::min(e.length, size - e.offset);
      within += in;
      if (in < e.length) std::memset(r->data() + pos + in, 0, e.length - in);
      pos += e.length;
    }
    pos = 0;
    for (int i = 0; i < iovcnt; ++i) {
      if (iov[i].iov_len == 0) continue;
      std::memcpy(iov[i].iov_base, r->data() + pos, iov[i].iov_len);
      pos += iov[i].iov_len;
    }
    return static_cast<int64_t>(within);
  });
}

int File::Fsync() {
  return Guarded<int>([&]() -> int {
    State& s = *state_;
    if (Status o = CheckOpen(s); !o.ok()) return Fail(o);
    if (Status r = Report(s, 0, false); !r.ok()) return Fail(r.WithContext("fsync"));
    if (Status y = s.c().SyncSync(s.handle, s.layout); !y.ok()) return Fail(y.WithContext("fsync"));
    return 0;
  });
}

int File::Stat(struct stat* st) {
  return Guarded<int>([&]() -> int {
    State& s = *state_;
    if (Status o = CheckOpen(s); !o.ok()) return Fail(o);
    if (st == nullptr) return Fail(EINVAL, "fstat: NULL stat buffer");
    Result<Attr> a = s.c().GetAttrSync(s.handle, s.caller);
    if (!a.ok()) return Fail(a.status().WithContext("fstat"));
    Attr attr = *a;
    {
      std::lock_guard<std::mutex> l(s.mu);
      if (s.writes != s.reported) attr.size = std::max(attr.size, s.write_end);
    }
    FillStat(attr, st);
    return 0;
  });
}

int File::Close() {
  return Guarded<int>([&]() -> int {
    State& s = *state_;
    if (!s.open.exchange(false)) return Fail(EBADF, "close: already closed");
    if (!s.writable) return 0;
    // The writer's open ends on M with the end of its writes; a written file
    // gets its exact size and allocation gathered once (as the mount's release).
    if (Status r = Report(s, -1, true); !r.ok()) return Fail(r.WithContext("close"));
    return 0;
  });
}

const char* LastError() { return client::ApiLastError(); }

}  // namespace clf::api

namespace clf::client {
namespace {
thread_local std::string t_last_error;
}  // namespace

int ApiFail(int err, std::string msg) {
  t_last_error = std::move(msg);
  return -err;
}

const char* ApiLastError() { return t_last_error.c_str(); }

}  // namespace clf::client
