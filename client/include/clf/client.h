// The internal Clusterfile client: clfmount, clf and the tests link it
// statically (not installed; applications use clf/clf.h or clf/clf.hpp).
//
// No gRPC, protobuf, RocksDB or ibverbs types. One Client talks to
// every server of a cluster; requests are routed by handle (server = handle >> 48).
//
// Thread safety: a Client is thread safe; share one per process.
// Callbacks: the async methods run their callback exactly once: on a library
// thread when the answer needs a server, or inline on the caller's thread
// before the call returns when it does not (validation errors, cached
// directory attributes). A callback must not block for long; it may start
// further async calls.
// Every call has a deadline (ClientOptions::rpc_timeout_ms per hop): a server that
// is down or stalled yields Code::kUnavailable (EIO), never a hang.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/config.h"
#include "common/extent.h"
#include "common/handle.h"
#include "common/layout.h"
#include "common/status.h"

namespace clf::client {

enum class FileType : uint8_t {
  kUnknown = 0, kRegular = 1, kDirectory = 2, kSymlink = 3, kFifo = 4, kSocket = 5, kChar = 6,
  kBlock = 7,
};

struct Timespec {
  int64_t sec = 0;
  uint32_t nsec = 0;
};

struct Attr {
  Handle handle = 0;
  FileType type = FileType::kUnknown;
  uint32_t mode = 0;  // permission bits only (07777)
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;
  uint32_t nlink = 0;
  Timespec atime, mtime, ctime;
  uint64_t rdev = 0;
  uint64_t blocks = 0;  // 512-byte blocks
  Layout layout;        // files: their layout; directories: default for new files
  bool has_xattrs = true;  // false: the server says the file has no extended attributes
  uint32_t writers = 0;    // regular files: opens for writing not yet reported to M
  bool existed = false;    // Create without exclusive: the name existed, nothing was created
  // Replicated files: the copies that missed a write, as (primary, slot)
  // (common/object_ref.h); they serve nothing until resynced.
  std::vector<std::pair<ServerId, uint32_t>> stale_replicas;
};

// Credentials of the caller (the FUSE request's uid/gid and groups).
struct Caller {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;
};

struct DirEntry {
  std::string name;
  Handle handle = 0;
  FileType type = FileType::kUnknown;
  Attr attr;  // filled when ReadDir was asked for attributes (plus)
};

struct DirPage {
  std::vector<DirEntry> entries;
  bool eof = false;
  Handle parent = 0;  // the directory's parent (root's parent is root)
};

// SetAttr field selectors.
enum SetAttrMask : uint32_t {
  kSetMode = 1, kSetUid = 2, kSetGid = 4, kSetSize = 8, kSetAtime = 16, kSetMtime = 32,
  kSetAtimeNow = 64, kSetMtimeNow = 128, kSetLayout = 256,
  // Not a field: the change is made through a descriptor the caller holds
  // open for writing (ftruncate), so the server skips the write-permission check.
  kSetViaOpenFile = 512,
  // Not fields: what a write or truncate clears (the mount asks, as the
  // kernel leaves it to the file system with FUSE_HANDLE_KILLPRIV_V2):
  // setuid, and setgid (when group-executable or the caller is not in the
  // group); the file capability.
  kKillSuidGid = 1024, kKillCaps = 2048,
  // chown(f, -1, -1): what a chown of a non-directory clears, nothing else.
  kChownNothing = 4096,
};

struct SetAttrArgs {
  uint32_t valid = 0;
  uint32_t mode = 0, uid = 0, gid = 0;
  uint64_t size = 0;
  Timespec atime, mtime;
  Layout layout;
};

struct CreateArgs {
  FileType type = FileType::kRegular;
  uint32_t mode = 0644;  // permission bits, umask already applied by the caller
  uint64_t rdev = 0;
  std::string symlink_target;
  bool exclusive = true;  // EEXIST if the name exists (O_EXCL); false: return the existing file
  // Regular files: the create opens the new file for writing (M counts a
  // writer until a ReportWrite with writers_delta -1). Not applied when the
  // name existed (Attr::existed): report that open with writers_delta +1.
  bool open_for_write = false;
};

// What a writer tells the file's metadata server (see Client::ReportWrite).
struct ReportWriteArgs {
  bool wrote = false;         // bytes were written: size (max) and mtime apply
  uint64_t size = 0;          // end of the writes
  int32_t writers_delta = 0;  // +1 an open for writing starts, -1 it ends
  bool refresh = false;       // gather exact size and allocation from the data servers now
};

struct RemoveResult {
  Handle handle = 0;
  bool orphaned = false;  // nlink hit 0 but the data was kept (keep_orphan): call Destroy later
};

struct ServerStatus {
  ServerId id = 0;
  std::string address;
  bool up = false;
  std::string error;  // why it is down
  int64_t uptime_s = 0;
  uint64_t objects = 0, inodes = 0, bytes_used = 0, bytes_free = 0, bytes_total = 0;
  uint64_t files_free = 0, rocksdb_bytes = 0, requests = 0;
  uint64_t lock_sessions = 0, locks_granted = 0, locks_waiting = 0;  // lock service
  uint64_t garbage = 0;       // removed files whose data objects are not yet freed
  std::string version;        // the server's clfd version
  // The server's clock minus this client's, in ms, measured to within
  // clock_skew_error_ms (half the time the status round took).
  int64_t clock_skew_ms = 0, clock_skew_error_ms = 0;
  std::string transport;     // bulk data path the server offers: "rdma(<provider>)", "tcp", or "grpc" (inline only)
  std::string data_address;  // its TCP data channel (empty: none)
  // Cross-server renames: intents of this server (as source) not settled yet,
  // and outcome records it keeps (as destination) until their source settled them.
  uint64_t rename_intents = 0, rename_outcomes = 0;
  // Replicated data: stale copies of the files whose metadata is on this
  // server, and this server's resync (bytes copied, copies made current,
  // one running now).
  uint64_t stale_copies = 0, resync_bytes = 0, resynced_copies = 0;
  bool resync_running = false;
};

struct StatFs {
  uint64_t bytes_total = 0, bytes_free = 0, files = 0, files_free = 0;
  uint32_t servers_up = 0, servers_down = 0;
};

// A directory lease (clfmount's async creates and unlinks; docs/ARCHITECTURE.md
// "Directory leases"): the complete listing, and handles to create with.
struct DirLeaseGrant {
  bool granted = false;
  std::string refused;    // why not, when not granted
  uint32_t lease_ms = 0;  // valid this long from when the request was sent
  Attr dir;
  std::vector<DirEntry> entries;  // attributes only when with_attrs
  bool with_attrs = false;
  Handle handle_first = 0;        // [handle_first, handle_first + handle_count)
  uint32_t handle_count = 0;
  Layout file_layout;  // new files here: this with first_server = FirstServerFor(handle)
};

// One change acknowledged under a lease, committed later (Client::Commit).
struct CommitOp {
  // kSync: the server's metadata WAL synced after the ops before it (parent:
  // the directory being synced).
  enum Kind : uint8_t { kCreate, kRemove, kSetAttr, kReport, kLink, kRename, kSync };
  Kind kind = kCreate;
  Handle parent = 0;  // create, remove, rename (source); link: the new name's directory
  std::string name;   // create, remove, rename (source); link: the new name
  Handle new_parent = 0;  // rename: the destination directory
  std::string new_name;   // rename: the destination name (free: the commit does not replace)
  bool directory = false;  // remove: an rmdir (of a directory this client emptied under its lease)
  Handle handle = 0;  // create: the new file's; setattr, report, link, rename: the file's
  CreateArgs create;  // create (regular files, symbolic links)
  Timespec time;      // create: when it was acknowledged
  SetAttrArgs setattr;
  ReportWriteArgs report;
  Caller caller;
};

// One extent of a noncontiguous list access (Client::WriteList / ReadList).
using FileExtent = Extent;  // common/extent.h: [offset, offset + length) of the file
// Most bytes one WriteList / ReadList call moves.
inline constexpr uint64_t kMaxListIoBytes = uint64_t{1} << 30;

template <typename T>
using Callback = std::function<void(Result<T>)>;
using StatusCallback = std::function<void(Status)>;

struct ClientOptions {
  uint32_t rpc_timeout_ms = 0;  // 0: the cluster file's rpc_timeout_ms
  // > 0: GetAttr of a directory may answer from attributes this client saw at
  // most this long ago (from its own create/remove/link replies, lookups and
  // getattrs). Bounded staleness, like a kernel attribute timeout; 0 = off.
  uint32_t dir_attr_cache_ms = 0;
  // Bulk data transport: "auto", "tcp", "rdma" or "grpc"; empty = the cluster
  // file's. rdma: one-sided RMA over libfabric with the cluster's
  // rdma_provider, no fallback. auto: RDMA when this host has a hardware
  // provider (verbs) and the server answers on its RDMA address, else the
  // server's TCP data channel, else (data port unreachable) inline gRPC, each
  // change logged once; tcp: the TCP data channel, no fallback.
  std::string transport;
  // Credential overrides (empty: the cluster file's). With [tls]: this client's
  // certificate and key (PEM; both or neither). Without TLS: the secret file
  // (a server's peer secret gives the server role, e.g. for Admin.RemoveObject).
  std::string tls_cert, tls_key;
  std::string secret_file;
  // Data-path scheduling (paper 000; see common/sched_settings.h): how a request is cut
  // into schedule blocks and in which order they are sent. Empty / 0 = the
  // cluster file's setting; a file's layout (clf setlayout --sched) overrides
  // both. sched: "first-ios", "random-ios", "hash-ios" (or first, random, hash).
  std::string sched;
  uint64_t sched_block = 0;   // b in bytes (multiple of 4 KiB, <= 32 MiB)
  uint32_t sched_window = 0;  // schedule blocks outstanding per request
  // Replicated files: which copy serves each block of a read (paper 001):
  // "eatf", "sjf", "lcdf", "lddf", "ldsdf", "random" or "primary"; empty = the
  // cluster file's; a file's layout (clf setlayout --read-sched) wins.
  std::string read_sched;
  // This client's rank among the clients (hash-IOS starts at server rank mod n;
  // servers rotate over ranks for reads). -1: derived from host name and pid.
  int64_t sched_rank = -1;
};

class Client {
 public:
  // Reads the cluster file and the credential (the client certificate with
  // [tls], else the secret); connects lazily (a down server is not an error here).
  static Result<std::unique_ptr<Client>> Open(const std::string& cluster_file,
                                              ClientOptions opts = {});
  static Result<std::unique_ptr<Client>> Open(const ClusterConfig& cluster, ClientOptions opts = {});
  // Reads the credential Open would use (files present, modes, PEM, role) without connecting.
  static Status CheckCredentials(const ClusterConfig& cluster, const ClientOptions& opts = {});
  virtual ~Client() = default;

  virtual const ClusterConfig& cluster() const = 0;
  // The transport data to server `s` uses: "rdma(<provider>)", "tcp" or "grpc";
  // "" before the first data call to it picked one.
  virtual std::string DataTransportOf(ServerId s) = 0;
  Handle root() const { return kRootHandle; }

  // ---- namespace (async) ----
  virtual void Lookup(Handle parent, std::string name, Caller caller, Callback<Attr> cb) = 0;
  virtual void GetAttr(Handle h, Caller caller, Callback<Attr> cb) = 0;
  virtual void SetAttr(Handle h, SetAttrArgs args, Caller caller, Callback<Attr> cb) = 0;
  virtual void Create(Handle parent, std::string name, CreateArgs args, Caller caller,
                      Callback<Attr> cb) = 0;
  virtual void Link(Handle h, Handle new_parent, std::string new_name, Caller caller,
                    Callback<Attr> cb) = 0;
  // Unlink (directory=false) or rmdir (directory=true). keep_orphan: the caller
  // has the file open; if nlink reaches 0 keep the data until Destroy().
  virtual void Remove(Handle parent, std::string name, bool directory, bool keep_orphan,
                      Caller caller, Callback<RemoveResult> cb) = 0;
  // flags: 1 = RENAME_NOREPLACE, 2 = RENAME_EXCHANGE. The result names a replaced target.
  virtual void Rename(Handle src_parent, std::string src_name, Handle dst_parent,
                      std::string dst_name, uint32_t flags, bool keep_orphan, Caller caller,
                      Callback<RemoveResult> cb) = 0;
  // Entries strictly after `after` in name order, at most max_entries.
  virtual void ReadDir(Handle dir, std::string after, uint32_t max_entries, bool plus,
                       Caller caller, Callback<DirPage> cb) = 0;
  virtual void Readlink(Handle h, Caller caller, Callback<std::string> cb) = 0;
  virtual void GetXattr(Handle h, std::string name, Caller caller, Callback<std::string> cb) = 0;
  // flags: 1 = XATTR_CREATE, 2 = XATTR_REPLACE
  virtual void SetXattr(Handle h, std::string name, std::string value, uint32_t flags,
                        Caller caller, StatusCallback cb) = 0;
  virtual void ListXattr(Handle h, Caller caller, Callback<std::vector<std::string>> cb) = 0;
  virtual void RemoveXattr(Handle h, std::string name, Caller caller, StatusCallback cb) = 0;
  // Frees an orphaned file (see Remove) once its last user closed it.
  virtual void Destroy(Handle h, StatusCallback cb) = 0;
  // The metadata server keeps a regular file's size and mtime; writers report
  // them: at close/fsync (the mount does), or after writes (WriteSync does).
  // Write() alone does not change the size other clients see until reported.
  virtual void ReportWrite(Handle h, ReportWriteArgs args, Caller caller, Callback<Attr> cb) = 0;

  // ---- directory leases (async) ----
  // This client's session: every call carries it; servers know lease holders by it.
  virtual uint64_t session() const = 0;
  // Asks the directory's server for a lease (not granted is not an error).
  // with_attrs: the listing carries the entries' attributes when the
  // directory is small enough (DirLeaseGrant.with_attrs).
  virtual void AcquireDirLease(Handle dir, uint32_t handles_wanted, bool with_attrs,
                               Caller caller, Callback<DirLeaseGrant> cb) = 0;
  virtual void ReleaseDirLease(Handle dir, StatusCallback cb) = 0;
  // Gives back every lease held on server `s` and ends its LeaseEvents poll.
  virtual void EndLeaseSession(ServerId s, StatusCallback cb) = 0;
  // Long poll of server `s`: the directories it recalls, or none after wait_ms.
  virtual void LeaseEvents(ServerId s, uint32_t wait_ms, Callback<std::vector<Handle>> cb) = 0;
  // Commits `ops` (all for directories/files of server `s`) in order; one
  // status per op.
  virtual void Commit(ServerId s, std::vector<CommitOp> ops,
                      Callback<std::vector<Status>> cb) = 0;

  // ---- data (async) ----
  // `layout` is the file's layout (from its Attr). Reads past the end return zeros
  // only up to the caller's known size: the caller trims with the file size.
  virtual void Write(Handle h, const Layout& layout, uint64_t offset, std::string data,
                     Callback<uint64_t> cb) = 0;
  // Reads [offset, offset+length); holes read as zeros. The result is exactly `length`
  // bytes; the caller trims it to the file size.
  virtual void Read(Handle h, const Layout& layout, uint64_t offset, uint64_t length,
                    Callback<std::string> cb) = 0;
  // Read into `buffer`'s memory: the result is `buffer`, resized to `length`
  // and overwritten. A buffer at least `length` long is reused as it is (no
  // zero fill of a fresh one); pass buffers of earlier reads to recycle them.
  virtual void ReadInto(Handle h, const Layout& layout, uint64_t offset, uint64_t length,
                        std::string buffer, Callback<std::string> cb) = 0;
  // A read whose bytes the caller hands on by splice (clfmount replies to
  // /dev/fuse from the pipe, saving the copy out of the socket): when the
  // range is one schedule block on one server whose data path splices (the
  // TCP data channel over a plaintext connection), its bytes land in the pipe
  // (ends `pipe_w`/`pipe_r`, empty, able to hold `length` bytes) and the
  // result's in_pipe is true; otherwise they are in the result's bytes
  // (`buffer`'s memory reused, as ReadInto) and the pipe stays empty.
  struct PipedRead {
    bool in_pipe = false;
    std::string bytes;
  };
  virtual void ReadToPipe(Handle h, const Layout& layout, uint64_t offset, uint64_t length,
                          int pipe_w, int pipe_r, std::string buffer, Callback<PipedRead> cb) = 0;
  // Noncontiguous list I/O: `extents` (file offsets, any order, at most
  // kMaxExtents of them, at most kMaxListIoBytes in all) and one buffer holding
  // their bytes packed in list order. Each data server gets ONE request with all
  // of its pieces (more only when its share passes 64 MiB or 2^18 pieces), sent
  // to the servers concurrently; the schedule-block settings do not apply.
  // Overlapping extents in a write: the later extent's bytes win. Zero-length
  // extents are allowed and move nothing. A list that breaks a bound is
  // refused (kTooBig, kFileTooBig; data size not the extents' total:
  // kInvalidArgument) before anything is sent. The result: bytes written, or
  // the extents' bytes (holes as zeros; the caller trims with the file size).
  virtual void WriteList(Handle h, const Layout& layout, std::vector<FileExtent> extents,
                         std::string data, Callback<uint64_t> cb) = 0;
  virtual void ReadList(Handle h, const Layout& layout, std::vector<FileExtent> extents,
                        Callback<std::string> cb) = 0;
  // Makes the file durable: its data on every data server (fdatasync of its
  // objects and of their directory entries) and its metadata (the RocksDB WAL
  // of the server owning h). With an all-zero layout (a directory) only the
  // metadata server of h is synced.
  virtual void Sync(Handle h, const Layout& layout, StatusCallback cb) = 0;

  // ---- cluster ----
  virtual void StatFs(Callback<StatFs> cb) = 0;
  // One entry per server; a down server is reported as down, not as an error.
  virtual std::vector<ServerStatus> ServerStatuses() = 0;
  // fsck support: what one server stores.
  struct ObjectListing {
    std::vector<Handle> data_objects;  // data objects held by the server
    std::vector<Handle> meta_objects;  // metadata objects (files, dirs, symlinks) it owns
    std::vector<Handle> orphans;       // unlinked-while-open files awaiting Destroy
  };
  virtual Result<ObjectListing> ListObjects(ServerId server) = 0;
  virtual Status RemoveDataObject(ServerId server, Handle h) = 0;

  // ---- blocking conveniences (tools, tests, applications) ----
  Result<Attr> LookupSync(Handle parent, const std::string& name, const Caller& c = {});
  Result<Attr> GetAttrSync(Handle h, const Caller& c = {});
  Result<Attr> SetAttrSync(Handle h, const SetAttrArgs& a, const Caller& c = {});
  Result<Attr> CreateSync(Handle parent, const std::string& name, const CreateArgs& a,
                          const Caller& c = {});
  Result<Attr> LinkSync(Handle h, Handle new_parent, const std::string& name,
                        const Caller& c = {});
  Result<RemoveResult> RemoveSync(Handle parent, const std::string& name, bool directory,
                                  const Caller& c = {});
  Result<RemoveResult> RenameSync(Handle sp, const std::string& sn, Handle dp,
                                  const std::string& dn, uint32_t flags = 0,
                                  const Caller& c = {});
  Result<DirPage> ReadDirSync(Handle dir, const std::string& after, uint32_t max, bool plus,
                              const Caller& c = {});
  Result<std::string> ReadlinkSync(Handle h, const Caller& c = {});
  // Write, then ReportWrite (size and allocation made exact on M).
  Result<uint64_t> WriteSync(Handle h, const Layout& l, uint64_t off, std::string data);
  Result<Attr> ReportWriteSync(Handle h, const ReportWriteArgs& a, const Caller& c = {});
  Result<std::string> ReadSync(Handle h, const Layout& l, uint64_t off, uint64_t len);
  // WriteList / ReadList, waiting (WriteListSync reports nothing to M: call
  // ReportWriteSync for the size).
  Result<uint64_t> WriteListSync(Handle h, const Layout& l, std::vector<FileExtent> extents,
                                 std::string data);
  Result<std::string> ReadListSync(Handle h, const Layout& l, std::vector<FileExtent> extents);
  Status SyncSync(Handle h, const Layout& l);
  Result<struct StatFs> StatFsSync();
  Status SetXattrSync(Handle h, const std::string& n, const std::string& v, uint32_t flags,
                      const Caller& c = {});
  Result<std::string> GetXattrSync(Handle h, const std::string& n, const Caller& c = {});
  Result<std::vector<std::string>> ListXattrSync(Handle h, const Caller& c = {});
  Status RemoveXattrSync(Handle h, const std::string& n, const Caller& c = {});

  // Resolves an absolute path inside the file system ("/a/b"); symlinks are not followed.
  Result<Attr> ResolvePath(const std::string& path, const Caller& c = {});
};

}  // namespace clf::client
