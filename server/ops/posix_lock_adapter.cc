#include "server/ops/posix_lock_adapter.h"

#include <optional>
#include <string>

namespace clf::server {

using locking::FlockType;
using locking::Owner;
using locking::PosixType;

Status PosixLockAdapter::Check(const v1::PosixLockRequest& r) {
  if (r.op() <= v1::POSIX_OP_UNSPECIFIED || r.op() > v1::FLOCK_UNLOCK) {
    return Invalid("unknown POSIX lock operation " + std::to_string(static_cast<int>(r.op())));
  }
  if (r.length() != 0 && r.length() > locking::kMaxOffset - r.start()) {
    return Invalid("POSIX lock range overflows 2^64");
  }
  return Status::Ok();
}

bool PosixLockAdapter::IsUnlock(const v1::PosixLockRequest& r) {
  return r.op() == v1::POSIX_UNLOCK || r.op() == v1::FLOCK_UNLOCK;
}

void PosixLockAdapter::CollectGrantedLocked(File& f,
                                            const std::vector<locking::WaitTicket>& granted,
                                            ReadyWaits* ready) {
  for (locking::WaitTicket t : granted) {
    auto it = f.waits.find(t);
    if (it == f.waits.end()) continue;
    if (std::shared_ptr<LockWait> w = waits_->Find(it->second)) {
      f.owners.try_emplace(w->owner, w->pid, std::chrono::steady_clock::now());
      ready->emplace_back(std::move(w), Status::Ok());
    }
    f.waits.erase(it);
  }
}

void PosixLockAdapter::MaybeDropFileLocked(Handle h) {
  auto it = files_.find(h);
  if (it == files_.end()) return;
  File& f = it->second;
  for (auto o = f.owners.begin(); o != f.owners.end();) {
    bool holds = !f.table.LocksOf(o->first).empty() || f.table.FlockOf(o->first).has_value();
    o = holds ? std::next(o) : f.owners.erase(o);
  }
  if (f.owners.empty() && f.waits.empty() && f.table.waiting() == 0) files_.erase(it);
}

uint64_t PosixLockAdapter::Lock(const v1::PosixLockRequest& r, LockWait::StatusDone done,
                                std::chrono::milliseconds wait) {
  const Owner owner{r.session().id(), r.owner()};
  const bool is_flock = r.op() >= v1::FLOCK_SHARED;
  const PosixType ptype = r.op() == v1::POSIX_READ    ? PosixType::kRead
                          : r.op() == v1::POSIX_WRITE ? PosixType::kWrite
                                                      : PosixType::kUnlock;
  const FlockType ftype = r.op() == v1::FLOCK_SHARED      ? FlockType::kShared
                          : r.op() == v1::FLOCK_EXCLUSIVE ? FlockType::kExclusive
                                                          : FlockType::kUnlock;
  const bool unlock = is_flock ? ftype == FlockType::kUnlock : ptype == PosixType::kUnlock;
  ReadyWaits ready;
  std::shared_ptr<LockWait> w;
  Status result;
  {
    std::lock_guard<std::mutex> l(mu_);
    File& f = files_[r.handle()];
    std::vector<locking::WaitTicket> granted;
    if (unlock || !r.wait() || r.reclaim()) {
      result = is_flock ? f.table.Flock(owner, ftype, &granted)
                        : f.table.SetLock(owner, ptype, r.start(), r.length(), &granted);
    } else {
      Result<locking::PosixWaitResult> wr =
          is_flock ? f.table.FlockWait(owner, ftype, &granted)
                   : f.table.SetLockWait(owner, ptype, r.start(), r.length(), &granted);
      if (!wr.ok()) {
        result = wr.status();
      } else if (!wr->granted) {
        w = std::make_shared<LockWait>();
        w->type = LockWait::Type::kPosix;
        w->status_done = std::move(done);
        w->handle = r.handle();
        w->ticket = wr->ticket;
        w->owner = owner;
        w->pid = r.pid();
        w->is_flock = is_flock;
        w->posix_type = ptype;
        w->start = r.start();
        w->length = r.length();
        w->since = std::chrono::steady_clock::now();
        f.waits[wr->ticket] = waits_->Add(w);
      }
    }
    if (result.ok() && !unlock && !w) {
      f.owners.try_emplace(owner, r.pid(), std::chrono::steady_clock::now());
    }
    CollectGrantedLocked(f, granted, &ready);
    if (!w) MaybeDropFileLocked(r.handle());
  }
  waits_->FinishAll(&ready);
  if (!w) {
    done(result);
    return 0;
  }
  waits_->SetDeadline(w->token, std::chrono::steady_clock::now() + wait);
  return w->token;
}

Result<v1::TestReply> PosixLockAdapter::Test(const v1::PosixLockRequest& r) const {
  if (r.op() != v1::POSIX_READ && r.op() != v1::POSIX_WRITE) {
    return Invalid("F_GETLK probes a read or a write lock");
  }
  if (r.length() != 0 && r.length() > locking::kMaxOffset - r.start()) {
    return Invalid("POSIX lock range overflows 2^64");
  }
  v1::TestReply rep;
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(r.handle());
  if (it == files_.end()) return rep;
  std::optional<locking::PosixLockInfo> c = it->second.table.GetLock(
      Owner{r.session().id(), r.owner()},
      r.op() == v1::POSIX_WRITE ? PosixType::kWrite : PosixType::kRead, r.start(), r.length());
  if (!c) return rep;
  rep.set_conflict(true);
  rep.set_session(c->owner.session);
  rep.set_owner(c->owner.owner);
  rep.set_mode(c->type == PosixType::kWrite ? v1::LOCK_EXCLUSIVE : v1::LOCK_SHARED);
  rep.set_offset(c->start);
  rep.set_length(c->length);
  auto o = it->second.owners.find(c->owner);
  if (o != it->second.owners.end()) rep.set_pid(o->second.first);
  return rep;
}

void PosixLockAdapter::Release(const v1::PosixReleaseRequest& r) {
  ReadyWaits ready;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(r.handle());
    if (it == files_.end()) return;
    File& f = it->second;
    std::vector<locking::WaitTicket> granted;
    for (uint64_t o : r.owners()) {
      Owner owner{r.session().id(), o};
      f.table.SetLock(owner, PosixType::kUnlock, 0, 0, &granted).IgnoreError();  // never blocks
      if (r.flock()) f.table.Flock(owner, FlockType::kUnlock, &granted).IgnoreError();
    }
    CollectGrantedLocked(f, granted, &ready);
    MaybeDropFileLocked(r.handle());
  }
  waits_->FinishAll(&ready);
}

void PosixLockAdapter::Cancel(const std::shared_ptr<LockWait>& w) {
  ReadyWaits ready;
  bool withdrawn = false;
  Code code;
  {
    std::lock_guard<std::mutex> wl(w->mu);
    code = w->cancel_code;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(w->handle);
    if (it != files_.end() && it->second.table.IsWaiting(w->ticket)) {
      std::vector<locking::WaitTicket> granted;
      it->second.table.CancelWait(w->ticket, &granted).IgnoreError();  // waiting: cannot fail
      it->second.waits.erase(w->ticket);
      withdrawn = true;
      CollectGrantedLocked(it->second, granted, &ready);
      MaybeDropFileLocked(w->handle);
    }
  }
  if (withdrawn) {
    ready.emplace_back(
        w, Status(code, code == Code::kTimedOut ? "lock wait timed out" : "lock wait cancelled"));
  }
  waits_->FinishAll(&ready);
}

ReadyWaits PosixLockAdapter::ReleaseSession(locking::SessionId session, Code code) {
  ReadyWaits ready;
  std::lock_guard<std::mutex> l(mu_);
  std::vector<Handle> touched;
  for (auto& [h, f] : files_) {
    std::vector<locking::WaitTicket> granted, cancelled;
    f.table.ReleaseSession(session, &granted, &cancelled);
    for (locking::WaitTicket t : cancelled) {
      auto it = f.waits.find(t);
      if (it == f.waits.end()) continue;
      if (std::shared_ptr<LockWait> w = waits_->Find(it->second)) {
        ready.emplace_back(std::move(w),
                           Status(code, code == Code::kStale ? "lock session lease expired"
                                                             : "lock session closed"));
      }
      f.waits.erase(it);
    }
    for (auto it = f.owners.begin(); it != f.owners.end();) {
      it = it->first.session == session ? f.owners.erase(it) : std::next(it);
    }
    CollectGrantedLocked(f, granted, &ready);
    touched.push_back(h);
  }
  for (Handle h : touched) MaybeDropFileLocked(h);
  return ready;
}

void PosixLockAdapter::AppendHolders(Handle handle, v1::ListLocksReply* rep) const {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [fh, f] : files_) {
    if (handle != 0 && fh != handle) continue;
    for (const auto& [owner, info] : f.owners) {
      // Named copies: clang 14 cannot capture structured bindings in a lambda.
      const Handle file = fh;
      const auto& who = owner;
      const auto& since = info;
      auto base = [&](v1::LockHolder* h) {
        h->set_handle(file);
        h->set_session(who.session);
        h->set_owner(who.owner);
        h->set_pid(since.first);
        h->set_age_ms(AgeMs(since.second));
      };
      for (const locking::PosixLockInfo& li : f.table.LocksOf(owner)) {
        v1::LockHolder* h = rep->add_locks();
        base(h);
        h->set_kind("fcntl");
        h->set_mode(li.type == PosixType::kWrite ? v1::LOCK_EXCLUSIVE : v1::LOCK_SHARED);
        v1::LockExtent* x = h->add_ranges();
        x->set_offset(li.start);
        x->set_length(li.length);
        h->set_extent_count(1);
      }
      if (std::optional<FlockType> ft = f.table.FlockOf(owner)) {
        v1::LockHolder* h = rep->add_locks();
        base(h);
        h->set_kind("flock");
        h->set_mode(*ft == FlockType::kExclusive ? v1::LOCK_EXCLUSIVE : v1::LOCK_SHARED);
        h->set_extent_count(1);
      }
    }
    for (const auto& [ticket, token] : f.waits) {
      std::shared_ptr<LockWait> w = waits_->Find(token);
      if (!w) continue;
      v1::LockHolder* h = rep->add_locks();
      h->set_handle(fh);
      h->set_session(w->owner.session);
      h->set_owner(w->owner.owner);
      h->set_pid(w->pid);
      h->set_kind(w->is_flock ? "flock" : "fcntl");
      h->set_waiting(true);
      h->set_age_ms(AgeMs(w->since));
      h->set_extent_count(1);
      if (!w->is_flock) {
        h->set_mode(w->posix_type == PosixType::kWrite ? v1::LOCK_EXCLUSIVE : v1::LOCK_SHARED);
        v1::LockExtent* x = h->add_ranges();
        x->set_offset(w->start);
        x->set_length(w->length);
      }
    }
  }
}

void PosixLockAdapter::Count(uint64_t* granted, uint64_t* waiting) const {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [h, f] : files_) {
    for (const auto& [owner, info] : f.owners) {
      *granted += f.table.LocksOf(owner).size() + (f.table.FlockOf(owner) ? 1 : 0);
    }
    *waiting += f.waits.size();
  }
}

}  // namespace clf::server
