#include "server/ops/lock_ops.h"

#include <algorithm>
#include <random>

#include "common/log.h"

namespace clf::server {

using locking::LockMode;
using locking::LockRequest;
using locking::Owner;
using locking::PosixType;
using locking::FlockType;

namespace {

uint64_t NewEpoch() {
  std::random_device rd;
  uint64_t e = 0;
  while (e == 0) e = (uint64_t{rd()} << 32) ^ rd();
  return e;
}

v1::LockMode ToProto(LockMode m) {
  return m == LockMode::kExclusive ? v1::LOCK_EXCLUSIVE : v1::LOCK_SHARED;
}

}  // namespace

LockOps::LockOps(ServerId self, LockOpsOptions options, const locking::Clock* clock)
    : self_(self),
      options_(options),
      epoch_(NewEpoch()),
      state_file_(options_.state_file, epoch_),
      grace_(self_, epoch_, state_file_.Read(), options_.grace_ms,
             locking::SteadyClock::Default()),
      manager_(clock, [this, &options] {
        locking::LockManagerOptions o;
        o.table.max_extents_per_lock = options.max_extents;
        o.on_expired = [this](locking::SessionId s) { OnSessionGone(s, Code::kStale); };
        return o;
      }()),
      waits_(options_.tick,
             LockWaits::Hooks{
                 .alarm_at = [this] { return grace_.DueAt(); },
                 .alarm = [this] { EndGrace(); },
                 .cancel = [this](uint64_t token) { CancelWait(token); },
                 .tick = [this] { manager_.ExpireSessions(); },  // -> OnSessionGone
             }) {
  state_file_.WriteIdle();
  waits_.Start();
}

LockOps::~LockOps() {
  waits_.Stop();
  // A clean stop holding no lock needs no grace period at the next start.
  if (state_file_.marked_used() && counts().granted == 0) state_file_.WriteIdle();
}

void LockOps::PersistSessions() {
  state_file_.WriteUsed([this] { return clients_.Ids(); });
}

// ---------------------------------------------------------------- checks

Status LockOps::CheckSession(const v1::SessionRef& s) const {
  if (s.epoch() != epoch_) {
    return Status(Code::kStale,
                  "lock session from before a restart of server " + std::to_string(self_) +
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

Result<LockRequest> LockOps::DecodeRequest(const v1::AcquireRequest& r, ListRecord* rec) const {
  if (!v1::LockMode_IsValid(r.mode())) return Invalid("unknown lock mode");
  rec->handle = r.handle();
  rec->owner = Owner{r.session().id(), r.owner()};
  rec->mode = r.mode() == v1::LOCK_EXCLUSIVE ? LockMode::kExclusive : LockMode::kShared;
  switch (r.kind()) {
    case v1::LOCK_WHOLE_FILE:
      rec->kind = "whole";
      rec->ranges = {Extent{0, locking::kToEof}};
      rec->extent_count = 1;
      return LockRequest::WholeFile();
    case v1::LOCK_RANGE: {
      uint64_t off = r.range().offset(), len = r.range().length();
      if (len == 0) len = locking::kToEof;
      if (len != locking::kToEof && len > locking::kMaxOffset - off) {
        return Invalid("lock range overflows 2^64");
      }
      rec->kind = "range";
      rec->ranges = {Extent{off, len}};
      rec->extent_count = 1;
      return LockRequest::Range(off, len);
    }
    case v1::LOCK_LIST: {
      if (r.extents_size() == 0) return Invalid("list lock without extents");
      if (static_cast<size_t>(r.extents_size()) > options_.max_extents) {
        return Status(Code::kTooBig, "list lock of " + std::to_string(r.extents_size()) +
                                         " extents (at most " +
                                         std::to_string(options_.max_extents) + ")");
      }
      std::vector<Extent> ext;
      ext.reserve(r.extents_size());
      for (const v1::LockExtent& e : r.extents()) ext.push_back(Extent{e.offset(), e.length()});
      CLF_ASSIGN_OR_RETURN(locking::ExtentList list, locking::ExtentList::FromExtents(std::move(ext)));
      if (list.empty()) return Invalid("list lock whose extents are all empty");
      rec->kind = "list";
      rec->extent_count = list.size();
      for (size_t i = 0; i < list.size() && i < kShownRanges; ++i) rec->ranges.push_back(list.extents()[i]);
      return LockRequest::List(std::move(list));
    }
    case v1::LOCK_PATTERN: {
      if (r.pattern_size() == 0 || static_cast<size_t>(r.pattern_size()) > locking::StridedPattern::kMaxDepth) {
        return Invalid("pattern lock needs 1 to " + std::to_string(locking::StridedPattern::kMaxDepth) +
                       " levels");
      }
      std::vector<locking::StridedLevel> levels;
      for (const v1::StridedLevel& l : r.pattern()) {
        levels.push_back(locking::StridedLevel{l.offset(), l.block_length(), l.stride(), l.count()});
      }
      CLF_ASSIGN_OR_RETURN(locking::StridedPattern p, locking::StridedPattern::Make(std::move(levels)));
      if (p.WalkSteps() > options_.max_extents) {
        return Status(Code::kTooBig, "pattern lock of " + std::to_string(p.WalkSteps()) +
                                         " blocks (at most " + std::to_string(options_.max_extents) +
                                         ")");
      }
      rec->kind = "pattern";
      rec->extent_count = p.WalkSteps();
      p.ForEachExtent([rec](Extent e) {
        rec->ranges.push_back(e);
        return rec->ranges.size() < kShownRanges;
      });
      return LockRequest::Pattern(std::move(p));
    }
    default:
      return Invalid("unknown lock kind " + std::to_string(static_cast<int>(r.kind())));
  }
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

void LockOps::OnSessionGone(locking::SessionId s, Code code) {
  ReadyWaits ready;
  {
    std::lock_guard<std::mutex> pl(posix_mu_);
    std::vector<Handle> touched;
    for (auto& [h, f] : posix_) {
      std::vector<locking::WaitTicket> granted, cancelled;
      f.table.ReleaseSession(s, &granted, &cancelled);
      {
        std::lock_guard<std::mutex> l(mu_);
        for (locking::WaitTicket t : cancelled) {
          auto it = f.waits.find(t);
          if (it == f.waits.end()) continue;
          if (std::shared_ptr<LockWait> w = waits_.Find(it->second)) {
            ready.emplace_back(std::move(w), Status(code, code == Code::kStale
                                                              ? "lock session lease expired"
                                                              : "lock session closed"));
          }
          f.waits.erase(it);
        }
      }
      for (auto it = f.owners.begin(); it != f.owners.end();) {
        it = it->first.session == s ? f.owners.erase(it) : std::next(it);
      }
      CollectGrantedLocked(f, granted, &ready);
      touched.push_back(h);
    }
    for (Handle h : touched) MaybeDropPosixFileLocked(h);
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = records_.begin(); it != records_.end();) {
      it = it->second.owner.session == s && it->second.granted ? records_.erase(it) : std::next(it);
    }
  }
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
  ListRecord rec;
  Status st = CheckSession(r.session());
  if (st.ok()) st = CheckHandle(r.handle());
  Result<LockRequest> req = st.ok() ? DecodeRequest(r, &rec) : Result<LockRequest>(st);
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
    uint32_t wait_ms =
        r.wait_ms() == 0 ? options_.max_wait_ms : std::min(r.wait_ms(), options_.max_wait_ms);
    if (Defer(w, wait_ms)) return w->token;
    done = std::move(w->lock_done);  // the grace period just ended: serve it now
  }
  if (!r.wait() || r.reclaim()) {
    Result<uint64_t> id = manager_.TryLock(r.handle(), rec.owner, rec.mode, *req);
    if (id.ok()) {
      rec.granted = true;
      rec.since = std::chrono::steady_clock::now();
      std::lock_guard<std::mutex> l(mu_);
      records_[*id] = std::move(rec);
    }
    done(std::move(id));
    return 0;
  }
  auto w = std::make_shared<LockWait>();
  w->type = LockWait::Type::kList;
  w->lock_done = std::move(done);
  waits_.Add(w);
  Result<uint64_t> id = manager_.LockAsync(r.handle(), rec.owner, rec.mode, *req,
                                           [this, w](Status s) { OnListOutcome(w, s); });
  if (!id.ok()) {
    waits_.Finish(w, id.status());
    return 0;
  }
  rec.since = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> l(mu_);
    records_[*id] = std::move(rec);
  }
  bool decided;
  Status outcome;
  {
    std::lock_guard<std::mutex> l(w->mu);
    w->lock_id = *id;
    decided = w->have_outcome;
    outcome = w->outcome;
  }
  if (decided) {
    OnListOutcome(w, outcome);
    return 0;
  }
  uint32_t wait_ms = r.wait_ms() == 0 ? options_.max_wait_ms : std::min(r.wait_ms(), options_.max_wait_ms);
  waits_.SetDeadline(w->token,
                     std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms));
  return w->token;
}

void LockOps::OnListOutcome(const std::shared_ptr<LockWait>& w, Status s) {
  uint64_t id;
  bool deliver = false, release = false;
  {
    std::lock_guard<std::mutex> l(w->mu);
    if (w->lock_id == 0) {  // LockAsync has not returned yet: it finishes the job
      w->have_outcome = true;
      w->outcome = s;
      return;
    }
    id = w->lock_id;
    if (w->finished) {
      release = s.ok();
    } else if (s.ok() && w->caller_gone) {
      release = true;  // granted to a caller that went away
      w->finished = true;
    } else {
      deliver = true;
      w->finished = true;
      if (s.code() == Code::kCancelled && w->cancel_code == Code::kTimedOut) {
        s = Status(Code::kTimedOut, "lock wait timed out");
      }
    }
  }
  if (release) manager_.Unlock(id).IgnoreError();
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = records_.find(id);
    if (it != records_.end()) {
      if (deliver && s.ok()) {
        it->second.granted = true;
        it->second.since = std::chrono::steady_clock::now();
      } else {
        records_.erase(it);
      }
    }
  }
  waits_.Forget(*w);
  if (!deliver) return;
  if (s.ok()) {
    w->lock_done(id);
  } else {
    w->lock_done(s);
  }
}

Status LockOps::Release(const v1::ReleaseRequest& r) {
  CLF_RETURN_IF_ERROR(CheckSession(r.session()));
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = records_.find(r.lock_id());
    if (it == records_.end() || it->second.owner.session != r.session().id()) {
      return NotFound("no lock " + std::to_string(r.lock_id()) + " in this session");
    }
    if (!it->second.granted) return Status(Code::kBusy, "lock request still waiting");
  }
  Status s = manager_.Unlock(r.lock_id());
  std::lock_guard<std::mutex> l(mu_);
  records_.erase(r.lock_id());
  return s;
}

Result<v1::TestReply> LockOps::Test(const v1::AcquireRequest& r) {
  CLF_RETURN_IF_ERROR(CheckSession(r.session()));
  CLF_RETURN_IF_ERROR(CheckHandle(r.handle()));
  ListRecord rec;
  CLF_ASSIGN_OR_RETURN(LockRequest req, DecodeRequest(r, &rec));
  v1::TestReply rep;
  std::optional<locking::LockConflict> c = manager_.FindConflict(r.handle(), rec.owner, rec.mode, req);
  if (!c) return rep;
  rep.set_conflict(true);
  rep.set_session(c->owner.session);
  rep.set_owner(c->owner.owner);
  rep.set_mode(ToProto(c->mode));
  rep.set_offset(c->extent.offset);
  rep.set_length(c->extent.length);
  rep.set_lock_id(c->id);
  if (std::optional<std::string> name = clients_.NameOf(c->owner.session)) {
    rep.set_client_name(*name);
  }
  return rep;
}

// ---------------------------------------------------------------- POSIX locks

void LockOps::CollectGrantedLocked(PosixFile& f, const std::vector<locking::WaitTicket>& granted,
                                   ReadyWaits* ready) {
  for (locking::WaitTicket t : granted) {
    auto it = f.waits.find(t);
    if (it == f.waits.end()) continue;
    if (std::shared_ptr<LockWait> w = waits_.Find(it->second)) {
      f.owners.try_emplace(w->owner, w->pid, std::chrono::steady_clock::now());
      ready->emplace_back(std::move(w), Status::Ok());
    }
    f.waits.erase(it);
  }
}

void LockOps::MaybeDropPosixFileLocked(Handle h) {
  auto it = posix_.find(h);
  if (it == posix_.end()) return;
  PosixFile& f = it->second;
  for (auto o = f.owners.begin(); o != f.owners.end();) {
    bool holds = !f.table.LocksOf(o->first).empty() || f.table.FlockOf(o->first).has_value();
    o = holds ? std::next(o) : f.owners.erase(o);
  }
  if (f.owners.empty() && f.waits.empty() && f.table.waiting() == 0) posix_.erase(it);
}

uint64_t LockOps::PosixLock(const v1::PosixLockRequest& r, StatusDone done) {
  Status st = CheckSession(r.session());
  if (st.ok()) st = CheckHandle(r.handle());
  if (st.ok() && (r.op() <= v1::POSIX_OP_UNSPECIFIED || r.op() > v1::FLOCK_UNLOCK)) {
    st = Invalid("unknown POSIX lock operation " + std::to_string(static_cast<int>(r.op())));
  }
  if (st.ok() && r.length() != 0 && r.length() > locking::kMaxOffset - r.start()) {
    st = Invalid("POSIX lock range overflows 2^64");
  }
  if (!st.ok()) {
    done(st);
    return 0;
  }
  const bool unlock_op = r.op() == v1::POSIX_UNLOCK || r.op() == v1::FLOCK_UNLOCK;
  if (r.reclaim()) {
    if (Status g = grace_.CheckReclaim(r.session().id()); !g.ok()) {
      done(g);
      return 0;
    }
  } else if (!unlock_op && grace_.running()) {
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
    uint32_t wait_ms =
        r.wait_ms() == 0 ? options_.max_wait_ms : std::min(r.wait_ms(), options_.max_wait_ms);
    if (Defer(w, wait_ms)) return w->token;
    done = std::move(w->status_done);
  }
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
    std::lock_guard<std::mutex> pl(posix_mu_);
    PosixFile& f = posix_[r.handle()];
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
        f.waits[wr->ticket] = waits_.Add(w);
      }
    }
    if (result.ok() && !unlock && !w) {
      f.owners.try_emplace(owner, r.pid(), std::chrono::steady_clock::now());
    }
    CollectGrantedLocked(f, granted, &ready);
    if (!w) MaybeDropPosixFileLocked(r.handle());
  }
  waits_.FinishAll(&ready);
  if (!w) {
    done(result);
    return 0;
  }
  uint32_t wait_ms = r.wait_ms() == 0 ? options_.max_wait_ms : std::min(r.wait_ms(), options_.max_wait_ms);
  waits_.SetDeadline(w->token,
                     std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms));
  return w->token;
}

Result<v1::TestReply> LockOps::PosixTest(const v1::PosixLockRequest& r) {
  CLF_RETURN_IF_ERROR(CheckSession(r.session()));
  CLF_RETURN_IF_ERROR(CheckHandle(r.handle()));
  if (r.op() != v1::POSIX_READ && r.op() != v1::POSIX_WRITE) {
    return Invalid("F_GETLK probes a read or a write lock");
  }
  if (r.length() != 0 && r.length() > locking::kMaxOffset - r.start()) {
    return Invalid("POSIX lock range overflows 2^64");
  }
  v1::TestReply rep;
  uint64_t session = 0;
  {
    std::lock_guard<std::mutex> pl(posix_mu_);
    auto it = posix_.find(r.handle());
    if (it == posix_.end()) return rep;
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
    session = c->owner.session;
  }
  if (std::optional<std::string> name = clients_.NameOf(session)) rep.set_client_name(*name);
  return rep;
}

Status LockOps::PosixRelease(const v1::PosixReleaseRequest& r) {
  CLF_RETURN_IF_ERROR(CheckSession(r.session()));
  CLF_RETURN_IF_ERROR(CheckHandle(r.handle()));
  if (static_cast<size_t>(r.owners_size()) > options_.max_release_owners) {
    return Status(Code::kTooBig, "too many owners in one release");
  }
  ReadyWaits ready;
  {
    std::lock_guard<std::mutex> pl(posix_mu_);
    auto it = posix_.find(r.handle());
    if (it == posix_.end()) return Status::Ok();
    PosixFile& f = it->second;
    std::vector<locking::WaitTicket> granted;
    for (uint64_t o : r.owners()) {
      Owner owner{r.session().id(), o};
      f.table.SetLock(owner, PosixType::kUnlock, 0, 0, &granted).IgnoreError();  // never blocks
      if (r.flock()) f.table.Flock(owner, FlockType::kUnlock, &granted).IgnoreError();
    }
    CollectGrantedLocked(f, granted, &ready);
    MaybeDropPosixFileLocked(r.handle());
  }
  waits_.FinishAll(&ready);
  return Status::Ok();
}

// ---------------------------------------------------------------- waits and time

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
    // Parked during the grace period.
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
    return;
  }
  if (w->type == LockWait::Type::kList) {
    // Ok: the manager reports kCancelled through OnListOutcome. kBusy: granted
    // meanwhile; OnListOutcome delivers it (or releases it if the caller left).
    manager_.Cancel(id).IgnoreError();
    return;
  }
  ReadyWaits ready;
  bool withdrawn = false;
  Code code;
  {
    std::lock_guard<std::mutex> l(w->mu);
    code = w->cancel_code;
  }
  {
    std::lock_guard<std::mutex> pl(posix_mu_);
    auto it = posix_.find(w->handle);
    if (it != posix_.end() && it->second.table.IsWaiting(w->ticket)) {
      std::vector<locking::WaitTicket> granted;
      it->second.table.CancelWait(w->ticket, &granted).IgnoreError();  // waiting: cannot fail
      it->second.waits.erase(w->ticket);
      withdrawn = true;
      CollectGrantedLocked(it->second, granted, &ready);
      MaybeDropPosixFileLocked(w->handle);
    }
  }
  if (withdrawn) {
    ready.emplace_back(w, Status(code, code == Code::kTimedOut ? "lock wait timed out"
                                                                : "lock wait cancelled"));
  }
  waits_.FinishAll(&ready);
}

bool LockOps::Defer(const std::shared_ptr<LockWait>& w, uint32_t wait_ms) {
  w->stage = LockWait::Stage::kDeferred;
  w->give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
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
  {
    std::lock_guard<std::mutex> pl(posix_mu_);
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [id, rec] : records_) {
      if (handle != 0 && rec.handle != handle) continue;
      v1::LockHolder* h = rep.add_locks();
      h->set_handle(rec.handle);
      h->set_session(rec.owner.session);
      h->set_owner(rec.owner.owner);
      h->set_kind(rec.kind);
      h->set_mode(ToProto(rec.mode));
      h->set_waiting(!rec.granted);
      for (const Extent& e : rec.ranges) {
        v1::LockExtent* x = h->add_ranges();
        x->set_offset(e.offset);
        x->set_length(e.length);
      }
      h->set_extent_count(rec.extent_count);
      h->set_age_ms(AgeMs(rec.since));
      h->set_lock_id(id);
    }
    for (const auto& [fh, f] : posix_) {
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
          v1::LockHolder* h = rep.add_locks();
          base(h);
          h->set_kind("fcntl");
          h->set_mode(li.type == PosixType::kWrite ? v1::LOCK_EXCLUSIVE : v1::LOCK_SHARED);
          v1::LockExtent* x = h->add_ranges();
          x->set_offset(li.start);
          x->set_length(li.length);
          h->set_extent_count(1);
        }
        if (std::optional<FlockType> ft = f.table.FlockOf(owner)) {
          v1::LockHolder* h = rep.add_locks();
          base(h);
          h->set_kind("flock");
          h->set_mode(*ft == FlockType::kExclusive ? v1::LOCK_EXCLUSIVE : v1::LOCK_SHARED);
          h->set_extent_count(1);
        }
      }
      for (const auto& [ticket, token] : f.waits) {
        std::shared_ptr<LockWait> wp = waits_.Find(token);
        if (!wp) continue;
        const LockWait& w = *wp;
        v1::LockHolder* h = rep.add_locks();
        h->set_handle(fh);
        h->set_session(w.owner.session);
        h->set_owner(w.owner.owner);
        h->set_pid(w.pid);
        h->set_kind(w.is_flock ? "flock" : "fcntl");
        h->set_waiting(true);
        h->set_age_ms(AgeMs(w.since));
        h->set_extent_count(1);
        if (!w.is_flock) {
          h->set_mode(w.posix_type == PosixType::kWrite ? v1::LOCK_EXCLUSIVE : v1::LOCK_SHARED);
          v1::LockExtent* x = h->add_ranges();
          x->set_offset(w.start);
          x->set_length(w.length);
        }
      }
    }
  }
  clients_.Describe(&rep);
  return rep;
}

LockOps::Counts LockOps::counts() {
  Counts c;
  c.sessions = clients_.size();
  std::lock_guard<std::mutex> pl(posix_mu_);
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [id, rec] : records_) ++(rec.granted ? c.granted : c.waiting);
  for (const auto& [h, f] : posix_) {
    for (const auto& [owner, info] : f.owners) {
      c.granted += f.table.LocksOf(owner).size() + (f.table.FlockOf(owner) ? 1 : 0);
    }
    c.waiting += f.waits.size();
  }
  return c;
}

}  // namespace clf::server
