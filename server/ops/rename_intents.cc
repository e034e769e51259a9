#include "server/ops/rename_intents.h"

#include <algorithm>

#include "common/log.h"

namespace clf::server {
namespace {

constexpr uint64_t kIntentBlock = 4096;  // ids reserved per high-water commit

}  // namespace

Status RenameIntents::Load() {
  std::lock_guard<std::mutex> l(mu_);
  pending_.clear();
  uint64_t max_seen = 0;
  for (auto& [id, value] : store_->RenameIntents()) {
    v1::RenameIntent in;
    if (!in.ParseFromString(value) || in.id() != id) {
      return Internal("corrupt rename intent record " + std::to_string(id));
    }
    pending_.emplace(id, std::move(in));
    if (ServerOf(id) == self_) max_seen = std::max(max_seen, id & kCounterMask);
  }
  // Ids up to the persisted mark may have been used before a crash; never reuse one
  // (D's outcome record for an old id would answer for the new intent).
  next_ = std::max(store_->IntentHighWater(), max_seen + 1);
  if (next_ == 0) next_ = 1;
  limit_ = next_;
  // Any id below the next one may have an outcome record on any destination,
  // if this server ever made an intent (its high-water mark is set). Else no
  // destination is told anything: a call to a peer not up yet (cluster start)
  // would put the channel to it into reconnect back-off for the first requests.
  told_.clear();
  sent_max_.clear();
  for (ServerId d = 0; d < servers_; ++d) {
    if (d == self_) continue;
    sent_max_[d] = 0;
    if (store_->IntentHighWater() != 0) sent_max_[d] = MakeHandle(self_, next_) - 1;
  }
  if (!pending_.empty()) {
    CLF_LOG_INFO("{} cross-server rename intents to settle", pending_.size());
  }
  return Status::Ok();
}

uint64_t RenameIntents::NewId() {
  std::lock_guard<std::mutex> l(mu_);
  if (next_ >= limit_) {
    RocksMetaStore::Batch b;
    b.PutIntentHighWater(next_ + kIntentBlock);
    Status s = store_->Commit(b);
    if (!s.ok()) return 0;
    limit_ = next_ + kIntentBlock;
  }
  const uint64_t id = MakeHandle(self_, next_++);
  in_flight_.insert(id);
  return id;
}

void RenameIntents::EndInFlight(uint64_t id) {
  {
    std::lock_guard<std::mutex> l(mu_);
    in_flight_.erase(id);
  }
  ended_cv_.notify_all();
}

Status RenameIntents::Record(const v1::RenameIntent& in) {
  RocksMetaStore::Batch b;
  b.PutRenameIntent(in.id(), in.SerializeAsString());
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  std::lock_guard<std::mutex> l(mu_);
  pending_.emplace(in.id(), in);
  const ServerId d = ServerOf(in.dst_parent());
  sent_max_[d] = std::max(sent_max_[d], in.id());
  return Status::Ok();
}

Status RenameIntents::Drop(uint64_t id) {
  RocksMetaStore::Batch b;
  b.DeleteRenameIntent(id);
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  Dropped(id);
  return Status::Ok();
}

void RenameIntents::Dropped(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  pending_.erase(id);
}

bool RenameIntents::HasPendingFor(Handle parent, const std::string& name) {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [id, in] : pending_) {
    if (in.src_parent() == parent && in.src_name() == name) return true;
  }
  return false;
}

RenameIntents::Matching RenameIntents::Match(
    const std::function<bool(const v1::RenameIntent&)>& match) {
  Matching out;
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [id, in] : pending_) {
    if (!match(in)) continue;
    if (in_flight_.count(id) != 0) {
      out.running.push_back(id);
    } else {
      out.idle.push_back(in);
    }
  }
  return out;
}

bool RenameIntents::WaitEnded(const std::vector<uint64_t>& ids,
                              std::chrono::steady_clock::time_point limit) {
  std::unique_lock<std::mutex> l(mu_);
  return ended_cv_.wait_until(l, limit, [&] {
    return std::none_of(ids.begin(), ids.end(),
                        [&](uint64_t id) { return in_flight_.count(id) != 0; });
  });
}

Result<v1::RenameIntent> RenameIntents::Idle(uint64_t id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = pending_.find(id);
  if (it == pending_.end()) return Status(Code::kStale, "rename intent is not pending");
  if (in_flight_.count(id) != 0) return Status(Code::kBusy, "its Rename call is still running");
  return it->second;
}

std::vector<uint64_t> RenameIntents::IdleIds() {
  std::vector<uint64_t> out;
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [id, in] : pending_) {
    if (in_flight_.count(id) == 0) out.push_back(id);
  }
  return out;
}

std::vector<std::pair<v1::RenameIntent, bool>> RenameIntents::Pending() {
  std::vector<std::pair<v1::RenameIntent, bool>> out;
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [id, in] : pending_) out.emplace_back(in, in_flight_.count(id) != 0);
  return out;
}

size_t RenameIntents::pending_count() {
  std::lock_guard<std::mutex> l(mu_);
  return pending_.size();
}

void RenameIntents::TellSettled() {
  uint64_t below = 0;
  std::vector<ServerId> to;
  {
    std::lock_guard<std::mutex> l(mu_);
    below = MakeHandle(self_, next_);
    for (const auto& [id, in] : pending_) {
      if (ServerOf(id) == self_) below = std::min(below, id);
    }
    if (!in_flight_.empty()) below = std::min(below, *in_flight_.begin());
    for (const auto& [d, max] : sent_max_) {
      const uint64_t told = told_[d];
      if (max != 0 && below > told && max >= told) to.push_back(d);
    }
  }
  for (ServerId d : to) {
    v1::ForgetRenamesRequest q;
    q.set_settled_below(below);
    Result<v1::ForgetRenamesReply> rep = peers_->ForgetRenames(d, q);
    if (!rep.ok()) continue;  // retried at the next pass
    std::lock_guard<std::mutex> l(mu_);
    told_[d] = std::max(told_[d], below);
  }
}

Result<std::optional<v1::InsertEntryReply>> RenameIntents::PriorOutcome(uint64_t id) {
  Result<std::string> prior = store_->GetRenameOutcome(id);
  if (prior.ok()) {
    v1::RenameOutcome o;
    if (!o.ParseFromString(*prior)) return Internal("corrupt rename outcome record");
    if (!o.applied()) return Status(Code::kCancelled, "rename intent was aborted");
    return std::optional<v1::InsertEntryReply>(o.reply());  // a repeat of an applied insert
  }
  if (prior.status().code() != Code::kNotFound) return prior.status();
  // Read after the record: ForgetBelow deletes records and raises the mark in one batch.
  if (id < store_->RenameWatermark(ServerOf(id))) {
    return Status(Code::kCancelled, "rename intent already settled at its source");
  }
  return std::optional<v1::InsertEntryReply>();
}

void RenameIntents::PutApplied(uint64_t id, const v1::InsertEntryReply& rep,
                               RocksMetaStore::Batch* b) {
  v1::RenameOutcome o;
  o.set_applied(true);
  *o.mutable_reply() = rep;
  b->PutRenameOutcome(id, o.SerializeAsString());
}

Result<v1::ResolveRenameReply> RenameIntents::Resolve(uint64_t id) {
  std::lock_guard<std::mutex> il(Lock(id));
  v1::ResolveRenameReply rep;
  Result<std::string> prior = store_->GetRenameOutcome(id);
  if (prior.ok()) {
    v1::RenameOutcome o;
    if (!o.ParseFromString(*prior)) return Internal("corrupt rename outcome record");
    rep.set_applied(o.applied());
    if (o.applied()) *rep.mutable_reply() = o.reply();
    return rep;
  }
  if (prior.status().code() != Code::kNotFound) return prior.status();
  if (id < store_->RenameWatermark(ServerOf(id))) {
    // Its source said it is settled and will never ask: the record is gone,
    // the outcome cannot be told (and must not be guessed).
    return Internal("rename intent " + std::to_string(id) + " was settled and forgotten");
  }
  v1::RenameOutcome o;
  o.set_applied(false);
  RocksMetaStore::Batch b;
  b.PutRenameOutcome(id, o.SerializeAsString());
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  rep.set_applied(false);
  return rep;
}

Result<uint32_t> RenameIntents::ForgetBelow(uint64_t settled_below) {
  const ServerId source = ServerOf(settled_below);
  std::lock_guard<std::mutex> l(forget_mu_);
  if (settled_below <= store_->RenameWatermark(source)) return 0u;
  std::vector<uint64_t> ids = store_->RenameOutcomeIds(source, settled_below);
  RocksMetaStore::Batch b;
  for (uint64_t id : ids) b.DeleteRenameOutcome(id);
  b.PutRenameWatermark(source, settled_below);
  CLF_RETURN_IF_ERROR(store_->Commit(b));
  return static_cast<uint32_t>(ids.size());
}

void RenameIntents::Run(const std::function<void()>& pass) {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    l.unlock();
    pass();
    l.lock();
    stop_cv_.wait_for(l, std::chrono::milliseconds(kRetryMs), [this] { return stop_; });
  }
}

void RenameIntents::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
}

}  // namespace clf::server
