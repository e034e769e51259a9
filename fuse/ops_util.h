// Helpers shared by the ops_*.cc handlers: attribute conversion, caller
// credentials, entry replies with lookup counting, and completion wrappers.
//
// Handler shape (CONVENTIONS §4): copy the arguments, start one async client
// call wrapped by Completion(), return. The completion replies exactly once,
// on a client library thread.
#pragma once

#include <sys/stat.h>

#include <exception>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>

#include "client/include/clf/client.h"
#include "common/log.h"
#include "common/posix_access.h"
#include "common/status.h"
#include "fuse/fuse_ll.h"
#include "fuse/mount.h"

namespace clf::fuse {

// st_mode type bits for a clf file type, and back.
mode_t TypeBits(client::FileType t);
client::FileType TypeOfMode(mode_t mode);

struct stat ToStat(const client::Attr& a);
fuse_entry_param ToEntry(const client::Attr& a, const MountOptions& o);
// Raises a regular file's st_size to the end of its write-behind bytes not yet
// on the servers (ReplyEntry and ReplyAttr do this; readdirplus entries too).
void FloorBehindSize(Mount& m, struct stat* st);

// The request's uid/gid and supplementary groups (groups are skipped for root,
// who bypasses permission checks anyway).
client::Caller CallerOf(fuse_req_t req);

// Permission checks (no -o default_permissions: the mount checks what it
// answers itself, the servers check every request they get; with it the
// kernel checks before asking). All of these allow everything when the
// kernel checks.
//
// The caller may access `a` with `mask` (common/posix_access.h bits).
bool Allowed(const Mount& m, const client::Caller& c, const client::Attr& a, uint32_t mask);
// Under a held lease on `dir`: the caller may not access it with `mask`
// (false also when the lease is gone meanwhile: the server then decides).
bool LeasedDirRefuses(Mount& m, fuse_ino_t dir, const client::Caller& c, uint32_t mask);
// The permission attributes the inode table kept for `ino`, as an Attr
// (type, mode, owner, group, link count; nothing else is filled in).
client::Attr PermAttr(fuse_ino_t ino, const InodeTable::Perm& p);
// Attributes of `ino` current enough for a permission check: a leased
// directory's, a file created here under a lease, or what this mount last
// saw within the attribute timeout (what the kernel would check against).
std::optional<client::Attr> CheckableAttr(Mount& m, fuse_ino_t ino);
// Calls then(ok) once it is known whether the caller may access `ino` with
// `mask` (fetching its attributes if none are current); replies the error
// itself (EACCES, or the fetch's) and does not call `then` when not.
void CheckAccessThen(fuse_req_t req, Mount& m, fuse_ino_t ino, const client::Caller& c,
                     uint32_t mask, std::function<void()> then);
// Calls then(attr) with CheckableAttr(ino), fetched from the server when none
// is current (a failed fetch is replied and `then` not called).
void WithCheckableAttr(fuse_req_t req, Mount& m, fuse_ino_t ino, const client::Caller& c,
                       std::function<void(const client::Attr&)> then);
// How long the kernel may keep a name in directory `parent` (the entry
// timeout). The kernel walks cached names without asking anyone when it does
// not check permissions itself, so a name in a directory that others may not
// search is not cached: each walk through it asks the mount, and the server
// checks the caller's search permission.
double EntryTimeoutIn(Mount& m, fuse_ino_t parent);

// Replies an entry for `a`, a name in `parent`, counting one lookup (undone if
// the reply fails).
// expired: the attributes are given already expired (a stat asks again).
void ReplyEntry(fuse_req_t req, Mount& m, const client::Attr& a, fuse_ino_t parent,
                bool expired = false);
// Replies attributes with the attribute timeout.
void ReplyAttr(fuse_req_t req, Mount& m, const client::Attr& a);
// Replies the errno of a failed status (logged at debug).
void ReplyStatus(fuse_req_t req, const Status& s, std::string_view op);

// FUSE_HANDLE_KILLPRIV_V2 (fuse/init_patch.h): the kernel leaves to the file
// system what a write or truncate clears. The bits (client::kKillSuidGid,
// kKillCaps) a write or truncate of `ino` by `c` asks the servers to clear,
// from what this mount knows of the file; 0 when nothing can be there.
// setuid/setgid stay for root (CAP_FSETID); a file capability goes for anyone.
uint32_t KillPrivBits(Mount& m, fuse_ino_t ino, const client::Caller& c);
// Reports this mount's writes of `ino` not yet reported to M (size and
// mtime; queued for a file created here under a lease), then `next` with
// the outcome (ops_file.cc).
void ReportWrites(Mount& m, fuse_ino_t ino, const client::Caller& caller,
                  std::function<void(Status)> next);
// Until when a missing security.capability xattr is remembered (attr_timeout).
InodeTable::Clock::time_point CapabilityHorizon(const Mount& m);
// The attribute timeout as a duration: how long an Attr this mount saw stays fresh.
InodeTable::Clock::duration AttrTtl(const Mount& m);

// Frees an orphaned file that no local descriptor holds, in the background.
void DestroyLater(Mount& m, Handle h);

// Checks a name from the kernel (the kernel allows up to 1024 bytes); replies
// ENAMETOOLONG and returns false if it is longer than 255.
bool CheckName(fuse_req_t req, const char* name);

// Runs fn; an escaping exception is logged and, if req is not null, answered
// with EIO (fn must not have replied yet when it throws: replies come last).
template <typename Fn>
void RunGuarded(fuse_req_t req, Fn&& fn) noexcept {
  try {
    fn();
  } catch (const std::exception& e) {
    CLF_LOG_ERROR("exception in fuse completion: {}", e.what());
    if (req != nullptr) fuse_reply_err(req, EIO);
  } catch (...) {
    CLF_LOG_ERROR("unknown exception in fuse completion");
    if (req != nullptr) fuse_reply_err(req, EIO);
  }
}

// Wraps a completion for an async client call: counts it in flight until it
// has run, and keeps exceptions out of the client library's frames.
template <typename T, typename F>
client::Callback<T> Completion(Mount& m, fuse_req_t req, F&& f) {
  m.BeginCall();
  return [&m, req, f = std::forward<F>(f)](Result<T> r) mutable {
    RunGuarded(req, [&] { f(std::move(r)); });
    m.EndCall();
  };
}

template <typename F>
client::StatusCallback StatusCompletion(Mount& m, fuse_req_t req, F&& f) {
  m.BeginCall();
  return [&m, req, f = std::forward<F>(f)](Status s) mutable {
    RunGuarded(req, [&] { f(std::move(s)); });
    m.EndCall();
  };
}

// Low-level handler trampoline: an exception thrown by a handler before it
// started its client call (e.g. bad_alloc copying arguments) becomes ENOMEM
// instead of unwinding through libfuse's C frames.
template <auto Fn>
struct Guard;
template <typename... A, void (*Fn)(fuse_req_t, A...)>
struct Guard<Fn> {
  static void Call(fuse_req_t req, A... a) noexcept {
    try {
      Fn(req, a...);
    } catch (const std::exception& e) {
      CLF_LOG_ERROR("exception in fuse handler: {}", e.what());
      fuse_reply_err(req, ENOMEM);
    } catch (...) {
      fuse_reply_err(req, ENOMEM);
    }
  }
};

// Handlers, one file per area.
namespace ops {
// ops_entry.cc
void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) noexcept;
void ForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets) noexcept;
void GetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi);
void Mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev);
void Mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode);
void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name);
void Rmdir(fuse_req_t req, fuse_ino_t parent, const char* name);
void Symlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name);
void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
            const char* newname, unsigned int flags);
void Link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname);
void Readlink(fuse_req_t req, fuse_ino_t ino);
// ops_file.cc
void Open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi);
void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void Write(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
           fuse_file_info* fi);
void WriteBuf(fuse_req_t req, fuse_ino_t ino, fuse_bufvec* in, off_t off, fuse_file_info* fi);
void Flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void Release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void Fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);
// ops_dir.cc
void Opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void Readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void Readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void Releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void Fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);
// ops_xattr.cc
void SetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
              int flags);
void GetXattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size);
void ListXattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void RemoveXattr(fuse_req_t req, fuse_ino_t ino, const char* name);
// ops_lock.cc
void GetLk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock);
void SetLk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock, int sleep);
void Flock(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, int op);
// flush: true if it took over the reply (the owner's fcntl locks are being released).
bool FlushLocks(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
// release: drops the open file's OFD and flock locks in the background.
void ReleaseLocks(Mount& m, fuse_ino_t ino, fuse_file_info* fi);
// ops_misc.cc
void Init(void* userdata, fuse_conn_info* conn);
void StatFs(fuse_req_t req, fuse_ino_t ino);
void Access(fuse_req_t req, fuse_ino_t ino, int mask);
}  // namespace ops

}  // namespace clf::fuse
