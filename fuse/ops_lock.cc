// Lock handlers: getlk, setlk (setlkw), flock, and the release of an owner's
// locks at flush and release, through the cluster's lock service (libclf
// LockClient), so locks taken through one mount block the others.
//
// Owners: the kernel's lock_owner. For classic fcntl locks it names the
// process's file table (closing any descriptor of the file releases them: the
// kernel sends FLUSH with that owner); for OFD locks and flock it names the
// open file (released at RELEASE). Each open gets a distinct fi->fh, and the
// owners that locked through it are remembered so RELEASE drops OFD locks too.
//
// A blocking SETLKW/flock registers an interrupt callback: a signal makes the
// kernel send INTERRUPT, the request is withdrawn on the server and the wait
// answers EINTR (the kernel restarts it if the handler has SA_RESTART).
//
// Coherence: a granted lock drops this mount's cached pages and attributes of
// the file (fuse_lowlevel_notify_inval_inode, from the notifier thread, before
// the reply), so what the previous holder wrote is read after the lock, as
// NFS does; a writer's data reaches the servers at fsync or close.
#include <fcntl.h>
#include <sys/file.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include "fuse/ops_util.h"

namespace clf::fuse::ops {
namespace {

using client::PosixLockType;

// Interrupt bookkeeping: libfuse may call the interrupt function after the
// reply freed the request, so the callback data is a key into this map, not a
// pointer.
struct WaitState {
  std::mutex mu;
  std::shared_ptr<client::PendingLock> pending;
  bool interrupted = false;
};

class Registry {
 public:
  uint64_t Add(std::shared_ptr<WaitState> s) {
    std::lock_guard<std::mutex> l(mu_);
    uint64_t id = next_++;
    waits_[id] = std::move(s);
    return id;
  }
  void Remove(uint64_t id) {
    std::lock_guard<std::mutex> l(mu_);
    waits_.erase(id);
  }
  std::shared_ptr<WaitState> Find(uint64_t id) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = waits_.find(id);
    return it == waits_.end() ? nullptr : it->second;
  }

  // Owners that may hold locks: per (ino, owner) for flush, per open (fh) for release.
  void NoteOwner(fuse_ino_t ino, uint64_t fh, uint64_t owner) {
    std::lock_guard<std::mutex> l(mu_);
    by_ino_.insert({ino, owner});
    by_fh_[fh].insert(owner);
  }
  // Flush: the owner's locks on ino go now; no open may release them again later.
  bool TakeOwner(fuse_ino_t ino, uint64_t owner) {
    std::lock_guard<std::mutex> l(mu_);
    if (by_ino_.erase({ino, owner}) == 0) return false;
    for (auto& [fh, owners] : by_fh_) owners.erase(owner);
    return true;
  }
  std::set<uint64_t> TakeOpen(fuse_ino_t ino, uint64_t fh) {
    std::lock_guard<std::mutex> l(mu_);
    std::set<uint64_t> owners;
    auto it = by_fh_.find(fh);
    if (it != by_fh_.end()) {
      owners = std::move(it->second);
      by_fh_.erase(it);
    }
    for (uint64_t o : owners) by_ino_.erase({ino, o});
    return owners;
  }

 private:
  std::mutex mu_;
  uint64_t next_ = 1;
  std::unordered_map<uint64_t, std::shared_ptr<WaitState>> waits_;
  std::set<std::pair<fuse_ino_t, uint64_t>> by_ino_;
  std::unordered_map<uint64_t, std::set<uint64_t>> by_fh_;
};

Registry& Reg() {
  static Registry* r = new Registry();  // lives as long as the process
  return *r;
}

// Runs invalidations then replies, off the client library's threads (libfuse:
// notify_inval_* must not run where it could deadlock with a request).
class Notifier {
 public:
  void Post(std::function<void()> fn) {
    std::lock_guard<std::mutex> l(mu_);
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { Loop(); });
      thread_.detach();  // process-lifetime; idle when the mount stops
    }
    q_.push_back(std::move(fn));
    cv_.notify_one();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [this] { return !q_.empty(); });
      std::function<void()> fn = std::move(q_.front());
      q_.pop_front();
      l.unlock();
      fn();
      l.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  std::thread thread_;
};

Notifier& Notify() {
  static Notifier* n = new Notifier();
  return *n;
}

void OnInterrupt(fuse_req_t /*req*/, void* data) {
  std::shared_ptr<WaitState> s = Reg().Find(reinterpret_cast<uintptr_t>(data));
  if (!s) return;
  std::shared_ptr<client::PendingLock> p;
  {
    std::lock_guard<std::mutex> l(s->mu);
    s->interrupted = true;
    p = s->pending;
  }
  CLF_LOG_DEBUG("lock wait interrupted");
  if (p) p->Cancel();
}

int LockErrno(const Status& s) {
  switch (s.code()) {
    case Code::kStale:
    case Code::kTooBig:
      return ENOLCK;
    default:
      return ToErrno(s);
  }
}

// Replies to a lock request; a granted lock first drops the cached pages.
void ReplyLock(fuse_req_t req, Mount& m, fuse_ino_t ino, bool granted_lock, const Status& s) {
  if (!s.ok()) {
    if (s.code() != Code::kWouldBlock && s.code() != Code::kCancelled) {
      CLF_LOG_DEBUG("lock {:#x}: {}", ino, s.ToString());
    }
    fuse_reply_err(req, LockErrno(s));
    return;
  }
  if (!granted_lock || m.session() == nullptr) {
    fuse_reply_err(req, 0);
    return;
  }
  m.BeginCall();
  Notify().Post([req, &m, ino] {
    RunGuarded(req, [&] {
      m.windows().Drop(ino);
      fuse_lowlevel_notify_inval_inode(m.session(), ino, 0, 0);  // ENOENT if not cached: fine
      fuse_reply_err(req, 0);
    });
    m.EndCall();
  });
}

// Starts a possibly blocking lock call with interrupt support.
template <typename Start>
void StartLock(fuse_req_t req, Mount& m, fuse_ino_t ino, bool wait, bool granted_lock, Start start) {
  auto ws = std::make_shared<WaitState>();
  const uint64_t id = Reg().Add(ws);
  if (wait) fuse_req_interrupt_func(req, OnInterrupt, reinterpret_cast<void*>(uintptr_t{id}));
  std::shared_ptr<client::PendingLock> p =
      start(StatusCompletion(m, req, [req, &m, ino, id, granted_lock](Status s) {
        Reg().Remove(id);
        ReplyLock(req, m, ino, granted_lock, s);
      }));
  bool cancel;
  {
    std::lock_guard<std::mutex> l(ws->mu);
    ws->pending = p;
    cancel = ws->interrupted;
  }
  if (cancel && p) p->Cancel();
}

}  // namespace

void GetLk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock) {
  Mount& m = MountOf(req);
  if (!m.has_locks()) return (void)fuse_reply_err(req, ENOLCK);
  struct flock probe = *lock;
  if (probe.l_start < 0 || probe.l_len < 0) return (void)fuse_reply_err(req, EINVAL);
  const PosixLockType type = probe.l_type == F_WRLCK ? PosixLockType::kWrite : PosixLockType::kRead;
  CLF_LOG_DEBUG("getlk {:#x} owner {:#x} type {} [{}, +{})", ino, fi->lock_owner, probe.l_type,
                probe.l_start, probe.l_len);
  m.locks().PosixTest(ino, fi->lock_owner, type, static_cast<uint64_t>(probe.l_start),
                      static_cast<uint64_t>(probe.l_len),
                      Completion<client::LockConflict>(m, req, [req, probe](Result<client::LockConflict> r) {
                        if (!r.ok()) return (void)fuse_reply_err(req, LockErrno(r.status()));
                        struct flock out = probe;
                        if (!r->conflict) {
                          out.l_type = F_UNLCK;
                        } else {
                          out.l_type = r->mode == client::LockMode::kExclusive ? F_WRLCK : F_RDLCK;
                          out.l_whence = SEEK_SET;
                          out.l_start = static_cast<off_t>(r->offset);
                          out.l_len = static_cast<off_t>(r->length);
                          out.l_pid = static_cast<pid_t>(r->pid);
                        }
                        fuse_reply_lock(req, &out);
                      }));
}

void SetLk(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, struct flock* lock, int sleep) {
  Mount& m = MountOf(req);
  if (!m.has_locks()) return (void)fuse_reply_err(req, ENOLCK);
  if (lock->l_start < 0 || lock->l_len < 0) return (void)fuse_reply_err(req, EINVAL);
  // The bytes written before a lock call are on the servers before it is
  // made: the next holder, on any mount, reads them (write-behind).
  if (m.ns().AfterWrites(ino, [req, ino, f = *fi, l = *lock, sleep]() mutable { SetLk(req, ino, &f, &l, sleep); })) {
    return;
  }
  PosixLockType type;
  switch (lock->l_type) {
    case F_RDLCK: type = PosixLockType::kRead; break;
    case F_WRLCK: type = PosixLockType::kWrite; break;
    case F_UNLCK: type = PosixLockType::kUnlock; break;
    default: return (void)fuse_reply_err(req, EINVAL);
  }
  const uint64_t owner = fi->lock_owner, start = static_cast<uint64_t>(lock->l_start),
                 length = static_cast<uint64_t>(lock->l_len);
  const uint32_t pid = static_cast<uint32_t>(lock->l_pid);
  const bool wait = sleep != 0 && type != PosixLockType::kUnlock;
  CLF_LOG_DEBUG("setlk{} {:#x} owner {:#x} type {} [{}, +{}) pid {}", wait ? "w" : "", ino, owner,
                lock->l_type, start, length, pid);
  if (type != PosixLockType::kUnlock) Reg().NoteOwner(ino, fi->fh, owner);
  StartLock(req, m, ino, wait, type != PosixLockType::kUnlock, [&](client::StatusCallback cb) {
    return m.locks().PosixLock(ino, owner, type, start, length, wait, pid, std::move(cb));
  });
}

void Flock(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi, int op) {
  Mount& m = MountOf(req);
  if (!m.has_locks()) return (void)fuse_reply_err(req, ENOLCK);
  if (m.ns().AfterWrites(ino, [req, ino, f = *fi, op]() mutable { Flock(req, ino, &f, op); })) return;
  client::FlockOp fop;
  switch (op & ~LOCK_NB) {
    case LOCK_SH: fop = client::FlockOp::kShared; break;
    case LOCK_EX: fop = client::FlockOp::kExclusive; break;
    case LOCK_UN: fop = client::FlockOp::kUnlock; break;
    default: return (void)fuse_reply_err(req, EINVAL);
  }
  const uint64_t owner = fi->lock_owner;
  const bool wait = (op & LOCK_NB) == 0 && fop != client::FlockOp::kUnlock;
  const uint32_t pid = static_cast<uint32_t>(fuse_req_ctx(req)->pid);
  CLF_LOG_DEBUG("flock {:#x} owner {:#x} op {}", ino, owner, op);
  if (fop != client::FlockOp::kUnlock) Reg().NoteOwner(ino, fi->fh, owner);
  StartLock(req, m, ino, wait, fop != client::FlockOp::kUnlock, [&](client::StatusCallback cb) {
    return m.locks().Flock(ino, owner, fop, wait, pid, std::move(cb));
  });
}

bool FlushLocks(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Mount& m = MountOf(req);
  if (!m.has_locks() || !Reg().TakeOwner(ino, fi->lock_owner)) return false;
  // close(2) of any descriptor drops the process's fcntl locks on the file;
  // the reply waits for the server so the next locker finds the lock free.
  m.locks().PosixRelease(ino, {fi->lock_owner}, false, StatusCompletion(m, req, [req, ino](Status s) {
                           if (!s.ok()) CLF_LOG_WARN("release locks of {:#x} at close: {}", ino, s.ToString());
                           fuse_reply_err(req, 0);
                         }));
  return true;
}

void ReleaseLocks(Mount& m, fuse_ino_t ino, fuse_file_info* fi) {
  if (!m.has_locks()) return;
  std::set<uint64_t> owners = Reg().TakeOpen(ino, fi->fh);
  if (fi->flock_release) owners.insert(fi->lock_owner);
  if (owners.empty()) return;
  // The last close of the open file: its OFD and flock locks go (in the background).
  m.BeginCall();
  m.locks().PosixRelease(ino, std::vector<uint64_t>(owners.begin(), owners.end()), true,
                         [&m, ino](Status s) {
                           if (!s.ok()) CLF_LOG_WARN("release locks of {:#x}: {}", ino, s.ToString());
                           m.EndCall();
                         });
}

}  // namespace clf::fuse::ops
