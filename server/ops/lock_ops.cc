#include "server/ops/lock_ops.h"

#include <algorithm>
#include <random>

#include "common/log.h"

namespace clf::server {

namespace {

uint64_t NewEpoch() {
  std::random_device rd;
  uint64_t e = 0;
  while (e == 0) e = (uint64_t{rd()} << 32) ^ rd();
  return e;
}

}  // namespace

LockOps::LockOps(ServerId self, LockOpsOptions options, const locking::Clock* clock)
    : self_(self),
      options_(std::move(options)),
      epoch_(NewEpoch()),
      state_file_(options_.state_file, epoch_),
      grace_(self_, epoch_, state_file_.Read(), options_.grace_ms, locking::SteadyClock::Default()),
      manager_(clock,
               [this] {
                 locking::LockManagerOptions o;
                 o.table.max_extents_per_lock = options_.max_extents;
                 o.on_expired = [this](locking::SessionId s) { OnSessionGone(s, Code::kStale); };
                 return o;
               }()),
      waits_(options_.tick, LockWaits::Hooks{
                                .alarm_at = [this] { return grace_.DueAt(); },
                                .alarm = [this] { EndGrace(); },
                                .cancel = [this](uint64_t token) { CancelWait(token); },
                                .tick = [this] { manager_.ExpireSessions(); },  // -> OnSessionGone
                            }),
      list_(&manager_, &waits_, options_.max_extents),
      posix_(&waits_) {
  state_file_.WriteIdle();
  waits_.Start();
}

LockOps::~LockOps() {
  waits_.Stop();
  // A clean stop holding no lock needs no grace period at the next start.
  if (state_file_.marked_used() && counts().granted == 0) state_file_.WriteIdle();
}

// ---------------------------------------------------------------- checks

Status LockOps::CheckSession(const v1::SessionRef& s) const {
  if (s.epoch() != epoch_) {
    return Status(Code::kStale, "lock session from before a restart of server " +
                                    std::to_string(self_) +
                                    ": its locks are lost; open a new session");
  }
  if (!manager_.IsLive(s.id())) {
    return Status(Code::kStale, "lock session lease expired or unknown: its locks were released");
  }
  return Status::Ok();
}

Status LockOps::CheckHandle(Handle h) const {
  if (h == 0) return Invalid("lock request without a file handle");
  if (ServerOf(h) != self_) {
    return Invalid("the locks of this file live on server " + std::to_string(ServerOf(h)) +
                   ", not " + std::to_string(self_));
  }
  return Status::Ok();
}

std::chrono::milliseconds LockOps::WaitFor(uint32_t wait_ms) const {
  return std::chrono::milliseconds(wait_ms == 0 ? options_.max_wait_ms
                                                : std::min(wait_ms, options_.max_wait_ms));
}

// ---------------------------------------------------------------- sessions

Result<v1::OpenSessionReply> LockOps::OpenSession(const v1::OpenSessionRequest& r,
                                                  std::string peer) {
  if (r.client_name().size() > 256) return Invalid("client name longer than 256 bytes");
  uint32_t lease = r.lease_ms() == 0 ? options_.default_lease_ms : r.lease_ms();
  lease = std::clamp(lease, options_.min_lease_ms, options_.max_lease_ms);
  if (clients_.size() >= options_.max_sessions) {
    return Status(Code::kBusy, "too many lock sessions on server " + std::to_string(self_));
  }
  CLF_ASSIGN_OR_RETURN(locking::SessionId id,
                       manager_.OpenSession(std::chrono::milliseconds(lease)));
  clients_.Add(id, LockClients::Client{r.client_name(), std::move(peer), lease});
  const bool reclaim = r.has_reclaim() && grace_.AdmitReclaim(id, r.reclaim());
  // Listed before the reply leaves: a crash after it finds the session listed.
  PersistSessions();
  if (r.has_reclaim()) {
    CLF_LOG_INFO("lock session {} of {}: reclaim of session {} of epoch {:016x} {}", id,
                 r.client_name(), r.reclaim().id(), r.reclaim().epoch(),
                 reclaim ? "accepted"
                         : "refused (not in the grace period, another epoch, or "
                           "reclaimed already)");
  }
  CLF_LOG_DEBUG("lock session {} opened by {} (lease {} ms)", id, r.client_name(), lease);
  v1::OpenSessionReply rep;
  rep.mutable_session()->set_id(id);
  rep.mutable_session()->set_epoch(epoch_);
  rep.set_lease_ms(lease);
  rep.set_reclaim(reclaim);
  rep.set_grace_ms_left(grace_.LeftMs());
  return rep;
}

Result<uint32_t> LockOps::RenewSession(const v1::SessionRef& s) {
  if (s.epoch() != epoch_) return CheckSession(s);
  Status st = manager_.RenewSession(s.id());
  if (!st.ok()) {
    return Status(Code::kStale, "lock session lease expired or unknown: its locks were released");
  }
  return clients_.LeaseMsOf(s.id()).value_or(options_.default_lease_ms);
}

Status LockOps::CloseSession(const v1::SessionRef& s) {
  CLF_RETURN_IF_ERROR(CheckSession(s));
  CLF_RETURN_IF_ERROR(manager_.CloseSession(s.id()));
  OnSessionGone(s.id(), Code::kCancelled);
  return Status::Ok();
}

Result<v1::ReclaimCompleteReply> LockOps::ReclaimComplete(const v1::ReclaimCompleteRequest& r) {
  if (r.has_session()) CLF_RETURN_IF_ERROR(CheckSession(r.session()));
  v1::ReclaimCompleteReply rep;
  CLF_ASSIGN_OR_RETURN(LockGrace::Progress progress, grace_.Complete(r));
  if (progress == LockGrace::Progress::kOver) return rep;  // nothing to end
  if (progress == LockGrace::Progress::kAllDone) {
    EndGrace(true);
    rep.set_grace_ended(true);
  }
  rep.set_grace_ms_left(grace_.LeftMs());
  return rep;
}

void LockOps::PersistSessions() {
  state_file_.WriteUsed([this] { return clients_.Ids(); });
}

void LockOps::OnSessionGone(locking::SessionId s, Code code) {
  ReadyWaits ready = posix_.ReleaseSession(s, code);
  list_.DropSession(s);
  grace_.SessionGone(s);
  std::optional<LockClients::Client> client = clients_.Remove(s);
  if (code == Code::kStale && client) {
    CLF_LOG_WARN("lock session {} of {} ({}) expired: its locks are released", s, client->name,
                 client->address);
  }
  PersistSessions();
  waits_.FinishAll(&ready);
}

// ---------------------------------------------------------------- list locks

uint64_t LockOps::Acquire(const v1::AcquireRequest& r, LockDone done) {
  ListLockAdapter::Record rec;
  Status st = CheckSession(r.session());
  if (st.ok()) st = CheckHandle(r.handle());
  Result<locking::LockRequest> req =
      st.ok() ? list_.Decode(r, &rec) : Result<locking::LockRequest>(st);
  if (!req.ok()) {
    done(req.status());
    return 0;
  }
  if (r.reclaim()) {
    if (Status g = grace_.CheckReclaim(r.session().id()); !g.ok()) {
      done(g);
      return 0;
    }
  } else if (grace_.running()) {
    if (!r.wait()) {
      done(grace_.Refusal());
      return 0;
    }
    auto w = std::make_shared<LockWait>();
    w->type = LockWait::Type::kList;
    w->lock_done = std::move(done);
    auto copy = std::make_shared<v1::AcquireRequest>(r);
    w->resume = [this, copy](const std::shared_ptr<LockWait>& self, uint32_t left_ms) {
      copy->set_wait_ms(left_ms);
      return Acquire(*copy,
                     [this, self](Result<uint64_t> id) { waits_.Finish(self, std::move(id)); });
    };
    if (Defer(w, WaitFor(r.wait_ms()))) return w->token;
    done = std::move(w->lock_done);  // the grace period just ended: serve it now
  }
  if (!r.wait() || r.reclaim()) {
    list_.TryLock(std::move(rec), *req, std::move(done));
    return 0;
  }
  return list_.Lock(std::move(rec), *req, std::move(done), WaitFor(r.wait_ms()));
}

Status LockOps::Release(const v1::ReleaseRequest& r) {
  CLF_RETURN_IF_ERROR(CheckSession(r.session()));
  return list_.Release(r);
}

Result<v1::TestReply> LockOps::Test(const v1::AcquireRequest& r) {
  CLF_RETURN_IF_ERROR(CheckSession(r.session()));
  CLF_RETURN_IF_ERROR(CheckHandle(r.handle()));
  CLF_ASSIGN_OR_RETURN(v1::TestReply rep, list_.Test(r));
  if (rep.conflict()) {
    if (std::optional<std::string> name = clients_.NameOf(rep.session())) {
      rep.set_client_name(*name);
    }
  }
  return rep;
}

// ---------------------------------------------------------------- POSIX locks

uint64_t LockOps::PosixLock(const v1::PosixLockRequest& r, StatusDone done) {
  Status st = CheckSession(r.session());
  if (st.ok()) st = CheckHandle(r.handle());
  if (st.ok()) st = PosixLockAdapter::Check(r);
  if (!st.ok()) {
    done(st);
    return 0;
  }
  if (r.reclaim()) {
    if (Status g = grace_.CheckReclaim(r.session().id()); !g.ok()) {
      done(g);
      return 0;
    }
  } else if (!PosixLockAdapter::IsUnlock(r) && grace_.running()) {
    if (!r.wait()) {
      done(grace_.Refusal());
      return 0;
    }
    auto w = std::make_shared<LockWait>();
    w->type = LockWait::Type::kPosix;
    w->status_done = std::move(done);
    auto copy = std::make_shared<v1::PosixLockRequest>(r);
    w->resume = [this, copy](const std::shared_ptr<LockWait>& self, uint32_t left_ms) {
      copy->set_wait_ms(left_ms);
      return PosixLock(*copy, [this, self](Status s) { waits_.Finish(self, s); });
    };
    if (Defer(w, WaitFor(r.wait_ms()))) return w->token;
    done = std::move(w->status_done);
  }
  return posix_.Lock(r, std::move(done), WaitFor(r.wait_ms()));
}

Result<v1::TestReply> LockOps::PosixTest(const v1::PosixLockRequest& r) {
  CLF_RETURN_IF_ERROR(CheckSession(r.session()));
  CLF_RETURN_IF_ERROR(CheckHandle(r.handle()));
  CLF_ASSIGN_OR_RETURN(v1::TestReply rep, posix_.Test(r));
  if (rep.conflict()) {
    if (std::optional<std::string> name = clients_.NameOf(rep.session())) {
      rep.set_client_name(*name);
    }
  }
  return rep;
}

Status LockOps::PosixRelease(const v1::PosixReleaseRequest& r) {
  CLF_RETURN_IF_ERROR(CheckSession(r.session()));
  CLF_RETURN_IF_ERROR(CheckHandle(r.handle()));
  if (static_cast<size_t>(r.owners_size()) > options_.max_release_owners) {
    return Status(Code::kTooBig, "too many owners in one release");
  }
  posix_.Release(r);
  return Status::Ok();
}

// ---------------------------------------------------------------- waits and the grace period

void LockOps::CancelWait(uint64_t token) {
  std::shared_ptr<LockWait> w = waits_.Find(token);
  if (!w) return;
  uint64_t id;
  bool parked;
  {
    std::lock_guard<std::mutex> l(w->mu);
    if (w->finished) return;
    if (!w->caller_gone) w->caller_gone = w->cancel_code != Code::kTimedOut;
    id = w->lock_id;
    parked = w->stage != LockWait::Stage::kNormal;
  }
  if (parked) {
    CancelParked(w);
  } else if (w->type == LockWait::Type::kList) {
    list_.Cancel(id);
  } else {
    posix_.Cancel(w);
  }
}

void LockOps::CancelParked(const std::shared_ptr<LockWait>& w) {
  uint64_t forward = 0;
  bool finish = false;
  Code code;
  {
    std::lock_guard<std::mutex> l(w->mu);
    code = w->cancel_code;
    if (w->stage == LockWait::Stage::kDeferred) {
      finish = true;
    } else if (w->stage == LockWait::Stage::kForwarded) {
      forward = w->forward;
    } else {
      w->cancel_pending = true;  // Resume cancels what it submitted
    }
  }
  if (finish) {
    grace_.Unpark(w);
    waits_.Finish(w, Status(code, code == Code::kTimedOut ? "lock wait timed out (grace period)"
                                                          : "lock wait cancelled"));
  } else if (forward != 0) {
    std::shared_ptr<LockWait> inner = waits_.Find(forward);
    if (inner && code == Code::kTimedOut) {
      std::lock_guard<std::mutex> l(inner->mu);
      inner->cancel_code = Code::kTimedOut;
    }
    CancelWait(forward);
  }
}

bool LockOps::Defer(const std::shared_ptr<LockWait>& w, std::chrono::milliseconds wait) {
  w->stage = LockWait::Stage::kDeferred;
  w->give_up = std::chrono::steady_clock::now() + wait;
  // Registered first so that EndGrace, which may run as soon as it is parked,
  // resumes a wait with a token; nobody knows the token before it is returned.
  waits_.Add(w);
  if (!grace_.Park(w)) {
    waits_.Forget(*w);
    return false;
  }
  waits_.SetDeadline(w->token, w->give_up);
  return true;
}

void LockOps::Resume(const std::shared_ptr<LockWait>& w) {
  {
    std::lock_guard<std::mutex> l(w->mu);
    if (w->finished || w->stage != LockWait::Stage::kDeferred) return;
    w->stage = LockWait::Stage::kResuming;
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  w->give_up - std::chrono::steady_clock::now())
                  .count();
  const uint64_t forward = w->resume(w, static_cast<uint32_t>(std::max<int64_t>(1, left)));
  bool cancel;
  {
    std::lock_guard<std::mutex> l(w->mu);
    w->resume = nullptr;
    w->stage = LockWait::Stage::kForwarded;
    w->forward = forward;
    cancel = w->cancel_pending && !w->finished;
  }
  if (cancel && forward != 0) CancelWait(forward);
}

void LockOps::EndGrace(bool early) {
  std::vector<std::shared_ptr<LockWait>> parked;
  if (!grace_.End(early, &parked)) return;
  waits_.Wake();
  for (const std::shared_ptr<LockWait>& w : parked) Resume(w);
}

// ---------------------------------------------------------------- admin

v1::ListLocksReply LockOps::ListLocks(Handle handle) {
  v1::ListLocksReply rep;
  rep.set_sessions(clients_.size());
  list_.AppendHolders(handle, &rep);
  posix_.AppendHolders(handle, &rep);
  clients_.Describe(&rep);
  return rep;
}

LockOps::Counts LockOps::counts() {
  Counts c;
  c.sessions = clients_.size();
  list_.Count(&c.granted, &c.waiting);
  posix_.Count(&c.granted, &c.waiting);
  return c;
}

}  // namespace clf::server
