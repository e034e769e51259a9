#include "locking/lock_manager.h"

namespace clf::locking {

LockManager::LockManager(const Clock* clock, LockManagerOptions options)
    : clock_(clock), options_(options), sessions_(clock) {}

void LockManager::Run(Deferred* deferred) {
  for (auto& [cb, status] : *deferred) cb(status);
  deferred->clear();
}

void LockManager::CompleteLocked(const std::vector<LockId>& granted,
                                 const std::vector<LockId>& failed, Code code, Deferred* deferred) {
  auto finish = [&](LockId id, Status status) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    if (!status.ok()) where_.erase(id);
    if (it->second.waiter != nullptr) {
      it->second.waiter->done = true;
      it->second.waiter->status = status;
      it->second.waiter->cv.notify_one();
    } else if (it->second.callback) {
      deferred->emplace_back(std::move(it->second.callback), status);
    }
    pending_.erase(it);
  };
  for (LockId id : granted) finish(id, Status::Ok());
  for (LockId id : failed) {
    finish(id,
           Status(code, code == Code::kStale ? "session lease expired" : "lock request cancelled"));
  }
}

void LockManager::MaybeDropTableLocked(FileId file) {
  auto it = tables_.find(file);
  if (it != tables_.end() && it->second->empty()) tables_.erase(it);
}

void LockManager::DropSessionLocked(SessionId session, Code code, Deferred* deferred) {
  std::vector<FileId> files;
  for (auto& [file, table] : tables_) {
    std::vector<LockId> granted, cancelled, released;
    table->ReleaseSession(session, &granted, &cancelled, &released);
    if (cancelled.empty() && released.empty()) continue;
    files.push_back(file);
    CompleteLocked(granted, cancelled, code, deferred);
    for (LockId id : released) where_.erase(id);
  }
  for (FileId f : files) MaybeDropTableLocked(f);
}

void LockManager::ExpireLocked(Deferred* deferred, size_t* expired) {
  if (sessions_.NextExpiry() > clock_->Now()) return;
  for (SessionId s : sessions_.TakeExpired()) {
    DropSessionLocked(s, Code::kStale, deferred);
    if (expired != nullptr) ++*expired;
    if (options_.on_expired) {
      deferred->emplace_back([this, s](Status) { options_.on_expired(s); }, Status::Ok());
    }
  }
}

size_t LockManager::ExpireSessions() {
  Deferred deferred;
  size_t expired = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ExpireLocked(&deferred, &expired);
  }
  Run(&deferred);
  return expired;
}

Result<SessionId> LockManager::OpenSession(Clock::Duration ttl) {
  std::lock_guard<std::mutex> lk(mu_);
  return sessions_.Open(ttl);
}

Status LockManager::RenewSession(SessionId session) {
  Deferred deferred;
  Status s;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ExpireLocked(&deferred, nullptr);
    s = sessions_.Renew(session);
  }
  Run(&deferred);
  return s;
}

Status LockManager::CloseSession(SessionId session) {
  Deferred deferred;
  Status s;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ExpireLocked(&deferred, nullptr);
    s = sessions_.Close(session);
    if (s.ok()) DropSessionLocked(session, Code::kCancelled, &deferred);
  }
  Run(&deferred);
  return s;
}

Result<AcquireOutcome> LockManager::StartLocked(FileId file, Owner owner, LockMode mode,
                                                const LockRequest& request, LockId id) {
  if (!sessions_.IsLive(owner.session)) return Status(Code::kStale, "session expired or unknown");
  std::unique_ptr<LockTable>& table = tables_[file];
  if (!table) table = std::make_unique<LockTable>(options_.table);
  Result<AcquireOutcome> r = table->Acquire(id, owner, mode, request);
  if (!r.ok()) {
    MaybeDropTableLocked(file);
    return r;
  }
  where_.emplace(id, file);
  return r;
}

Result<LockId> LockManager::TryLock(FileId file, Owner owner, LockMode mode,
                                    const LockRequest& request) {
  Deferred deferred;
  Result<LockId> result = Status(Code::kInternal, "unset");
  {
    std::lock_guard<std::mutex> lk(mu_);
    ExpireLocked(&deferred, nullptr);
    if (!sessions_.IsLive(owner.session)) {
      result = Status(Code::kStale, "session expired or unknown");
    } else {
      std::unique_ptr<LockTable>& table = tables_[file];
      if (!table) table = std::make_unique<LockTable>(options_.table);
      LockId id = next_id_++;
      Status s = table->TryAcquire(id, owner, mode, request);
      if (s.ok()) {
        where_.emplace(id, file);
        result = id;
      } else {
        MaybeDropTableLocked(file);
        result = s;
      }
    }
  }
  Run(&deferred);
  return result;
}

Result<LockId> LockManager::Lock(FileId file, Owner owner, LockMode mode,
                                 const LockRequest& request, Deadline deadline) {
  Deferred deferred;
  Result<LockId> result = Status(Code::kInternal, "unset");
  {
    std::unique_lock<std::mutex> lk(mu_);
    ExpireLocked(&deferred, nullptr);
    LockId id = next_id_++;
    Result<AcquireOutcome> r = StartLocked(file, owner, mode, request, id);
    if (!r.ok()) {
      result = r.status();
    } else if (*r == AcquireOutcome::kGranted) {
      result = id;
    } else {
      Waiter waiter;
      pending_[id].waiter = &waiter;
      while (!waiter.done) {
        if (waiter.cv.wait_until(lk, deadline) == std::cv_status::timeout && !waiter.done) {
          std::vector<LockId> granted;
          tables_.at(file)->Cancel(id, &granted).IgnoreError();  // still waiting: cannot fail
          pending_.erase(id);
          where_.erase(id);
          CompleteLocked(granted, {}, Code::kOk, &deferred);
          MaybeDropTableLocked(file);
          waiter.done = true;
          waiter.status = Status(Code::kTimedOut, "lock wait timed out");
        }
      }
      if (waiter.status.ok()) {
        result = id;
      } else {
        result = waiter.status;
      }
    }
  }
  Run(&deferred);
  return result;
}

Result<LockId> LockManager::LockAsync(FileId file, Owner owner, LockMode mode,
                                      const LockRequest& request, Callback done) {
  Deferred deferred;
  Result<LockId> result = Status(Code::kInternal, "unset");
  {
    std::lock_guard<std::mutex> lk(mu_);
    ExpireLocked(&deferred, nullptr);
    LockId id = next_id_++;
    Result<AcquireOutcome> r = StartLocked(file, owner, mode, request, id);
    if (!r.ok()) {
      result = r.status();
    } else {
      result = id;
      if (*r == AcquireOutcome::kGranted) {
        deferred.emplace_back(std::move(done), Status::Ok());
      } else {
        pending_[id].callback = std::move(done);
      }
    }
  }
  Run(&deferred);
  return result;
}

Status LockManager::Cancel(LockId id) {
  Deferred deferred;
  Status s;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ExpireLocked(&deferred, nullptr);
    auto it = where_.find(id);
    if (it == where_.end()) {
      s = NotFound("no such lock request");
    } else {
      FileId file = it->second;
      std::vector<LockId> granted;
      s = tables_.at(file)->Cancel(id, &granted);
      if (s.ok()) {
        CompleteLocked(granted, {id}, Code::kCancelled, &deferred);
        where_.erase(id);
        MaybeDropTableLocked(file);
      }
    }
  }
  Run(&deferred);
  return s;
}

Status LockManager::Unlock(LockId id) {
  Deferred deferred;
  Status s;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ExpireLocked(&deferred, nullptr);
    auto it = where_.find(id);
    if (it == where_.end()) {
      s = NotFound("no such lock");
    } else {
      FileId file = it->second;
      std::vector<LockId> granted;
      s = tables_.at(file)->Release(id, &granted);
      CompleteLocked(granted, {id}, Code::kCancelled, &deferred);  // {id}: if it was waiting
      where_.erase(id);
      MaybeDropTableLocked(file);
    }
  }
  Run(&deferred);
  return s;
}

bool LockManager::IsLive(SessionId session) const {
  std::lock_guard<std::mutex> lk(mu_);
  return sessions_.IsLive(session);
}

std::optional<LockConflict> LockManager::FindConflict(FileId file, Owner owner, LockMode mode,
                                                      const LockRequest& request) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = tables_.find(file);
  if (it == tables_.end()) return std::nullopt;
  return it->second->FindConflict(owner, mode, request);
}

size_t LockManager::GrantedLocks(FileId file) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = tables_.find(file);
  return it == tables_.end() ? 0 : it->second->granted_locks();
}

size_t LockManager::WaitingRequests(FileId file) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = tables_.find(file);
  return it == tables_.end() ? 0 : it->second->waiting_requests();
}

}  // namespace clf::locking
