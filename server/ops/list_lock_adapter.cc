#include "server/ops/list_lock_adapter.h"

#include <optional>
#include <utility>

namespace clf::server {

using locking::LockMode;
using locking::LockRequest;
using locking::Owner;

namespace {

v1::LockMode ToProto(LockMode m) {
  return m == LockMode::kExclusive ? v1::LOCK_EXCLUSIVE : v1::LOCK_SHARED;
}

}  // namespace

Result<LockRequest> ListLockAdapter::Decode(const v1::AcquireRequest& r, Record* rec) const {
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
      if (static_cast<size_t>(r.extents_size()) > max_extents_) {
        return Status(Code::kTooBig, "list lock of " + std::to_string(r.extents_size()) +
                                         " extents (at most " + std::to_string(max_extents_) + ")");
      }
      std::vector<Extent> ext;
      ext.reserve(r.extents_size());
      for (const v1::LockExtent& e : r.extents()) ext.push_back(Extent{e.offset(), e.length()});
      CLF_ASSIGN_OR_RETURN(locking::ExtentList list,
                           locking::ExtentList::FromExtents(std::move(ext)));
      if (list.empty()) return Invalid("list lock whose extents are all empty");
      rec->kind = "list";
      rec->extent_count = list.size();
      for (size_t i = 0; i < list.size() && i < kShownRanges; ++i) {
        rec->ranges.push_back(list.extents()[i]);
      }
      return LockRequest::List(std::move(list));
    }
    case v1::LOCK_PATTERN: {
      if (r.pattern_size() == 0 ||
          static_cast<size_t>(r.pattern_size()) > locking::StridedPattern::kMaxDepth) {
        return Invalid("pattern lock needs 1 to " +
                       std::to_string(locking::StridedPattern::kMaxDepth) + " levels");
      }
      std::vector<locking::StridedLevel> levels;
      for (const v1::StridedLevel& l : r.pattern()) {
        levels.push_back(
            locking::StridedLevel{l.offset(), l.block_length(), l.stride(), l.count()});
      }
      CLF_ASSIGN_OR_RETURN(locking::StridedPattern p,
                           locking::StridedPattern::Make(std::move(levels)));
      if (p.WalkSteps() > max_extents_) {
        return Status(Code::kTooBig, "pattern lock of " + std::to_string(p.WalkSteps()) +
                                         " blocks (at most " + std::to_string(max_extents_) + ")");
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

void ListLockAdapter::TryLock(Record rec, const LockRequest& req, LockWait::LockDone done) {
  Result<uint64_t> id = manager_->TryLock(rec.handle, rec.owner, rec.mode, req);
  if (id.ok()) {
    rec.granted = true;
    rec.since = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> l(mu_);
    records_[*id] = std::move(rec);
  }
  done(std::move(id));
}

uint64_t ListLockAdapter::Lock(Record rec, const LockRequest& req, LockWait::LockDone done,
                               std::chrono::milliseconds wait) {
  auto w = std::make_shared<LockWait>();
  w->type = LockWait::Type::kList;
  w->lock_done = std::move(done);
  waits_->Add(w);
  Result<uint64_t> id = manager_->LockAsync(rec.handle, rec.owner, rec.mode, req,
                                            [this, w](Status s) { OnOutcome(w, s); });
  if (!id.ok()) {
    waits_->Finish(w, id.status());
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
    OnOutcome(w, outcome);
    return 0;
  }
  waits_->SetDeadline(w->token, std::chrono::steady_clock::now() + wait);
  return w->token;
}

void ListLockAdapter::OnOutcome(const std::shared_ptr<LockWait>& w, Status s) {
  uint64_t id;
  bool deliver = false, release = false;
  {
    std::lock_guard<std::mutex> l(w->mu);
    if (w->lock_id == 0) {  // LockAsync has not returned yet: Lock finishes the job
      w->have_outcome = true;
      w->outcome = s;
      return;
    }
    id = w->lock_id;
    if (w->finished) {
      release = s.ok();
    } else if (s.ok() && w->caller_gone) {
      // Granted to a caller that went away: the lock goes back, and the call
      // still completes (exactly once: its reactor finishes only then).
      release = true;
      deliver = true;
      w->finished = true;
      s = Status(Code::kCancelled, "lock wait cancelled: the caller went away");
    } else {
      deliver = true;
      w->finished = true;
      if (s.code() == Code::kCancelled && w->cancel_code == Code::kTimedOut) {
        s = Status(Code::kTimedOut, "lock wait timed out");
      }
    }
  }
  if (release) manager_->Unlock(id).IgnoreError();
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
  waits_->Forget(*w);
  if (!deliver) return;
  if (s.ok()) {
    w->lock_done(id);
  } else {
    w->lock_done(s);
  }
}

void ListLockAdapter::Cancel(uint64_t lock_id) {
  // Ok: the manager reports kCancelled through OnOutcome. kBusy: granted
  // meanwhile; OnOutcome delivers it (or releases it if the caller left).
  manager_->Cancel(lock_id).IgnoreError();
}

Status ListLockAdapter::Release(const v1::ReleaseRequest& r) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = records_.find(r.lock_id());
    if (it == records_.end() || it->second.owner.session != r.session().id()) {
      return NotFound("no lock " + std::to_string(r.lock_id()) + " in this session");
    }
    if (!it->second.granted) return Status(Code::kBusy, "lock request still waiting");
  }
  Status s = manager_->Unlock(r.lock_id());
  std::lock_guard<std::mutex> l(mu_);
  records_.erase(r.lock_id());
  return s;
}

Result<v1::TestReply> ListLockAdapter::Test(const v1::AcquireRequest& r) const {
  Record rec;
  CLF_ASSIGN_OR_RETURN(LockRequest req, Decode(r, &rec));
  v1::TestReply rep;
  std::optional<locking::LockConflict> c =
      manager_->FindConflict(r.handle(), rec.owner, rec.mode, req);
  if (!c) return rep;
  rep.set_conflict(true);
  rep.set_session(c->owner.session);
  rep.set_owner(c->owner.owner);
  rep.set_mode(ToProto(c->mode));
  rep.set_offset(c->extent.offset);
  rep.set_length(c->extent.length);
  rep.set_lock_id(c->id);
  return rep;
}

void ListLockAdapter::DropSession(locking::SessionId session) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = records_.begin(); it != records_.end();) {
    it = it->second.owner.session == session && it->second.granted ? records_.erase(it)
                                                                   : std::next(it);
  }
}

void ListLockAdapter::AppendHolders(Handle handle, v1::ListLocksReply* rep) const {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [id, rec] : records_) {
    if (handle != 0 && rec.handle != handle) continue;
    v1::LockHolder* h = rep->add_locks();
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
}

void ListLockAdapter::Count(uint64_t* granted, uint64_t* waiting) const {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [id, rec] : records_) ++*(rec.granted ? granted : waiting);
}

}  // namespace clf::server
