#include "fuse/commit_queue.h"

#include <sys/stat.h>

#include <algorithm>
#include <unordered_set>

#include "common/log.h"

namespace clf::fuse {

using client::CommitOp;

namespace {

const char* KindName(CommitOp::Kind k) {
  switch (k) {
    case CommitOp::kCreate: return "create";
    case CommitOp::kRemove: return "unlink";
    case CommitOp::kSetAttr: return "setattr";
    case CommitOp::kReport: return "size report";
    case CommitOp::kLink: return "link";
    case CommitOp::kRename: return "rename";
    case CommitOp::kSync: return "sync";
  }
  return "change";
}

bool TouchesOp(const std::vector<Handle>& touches, Handle x) {
  return std::find(touches.begin(), touches.end(), x) != touches.end();
}

}  // namespace

CommitQueue::CommitQueue(Options o, Hooks h, bool start_timer) : opt_(o), hooks_(std::move(h)) {
  if (start_timer) timer_ = std::thread([this] { TimerLoop(); });
}

CommitQueue::~CommitQueue() { Stop(); }

void CommitQueue::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (timer_.joinable()) timer_.join();
}

bool CommitQueue::Enqueue(CommitOp op, ServerId server, std::vector<Handle> touches) {
  std::lock_guard<std::mutex> l(mu_);
  return EnqueueLocked(std::move(op), server, std::move(touches));
}

bool CommitQueue::EnqueueLocked(CommitOp op, ServerId server, std::vector<Handle> touches) {
  pending_.Add(op, touches);
  const Clock::time_point now = Clock::now();
  queue_.push_back(Op{std::move(op), server, std::move(touches), next_seq_++, now});
  if (inflight_) return false;  // the round on the wire kicks the next one
  if (!ReadyLocked(now)) {
    if (queue_.size() == 1) cv_.notify_all();  // the timer starts
    return false;
  }
  inflight_ = true;
  return true;
}

CommitQueue::Clock::time_point CommitQueue::NextRoundLocked() const {
  // batch_delay after the oldest change, and after the last round went: a
  // change passed over by that round (a size report waiting for its data,
  // one depending on it) keeps the queue's head old, and must not make every
  // round go as soon as the previous is back with whatever arrived meanwhile.
  return std::max(queue_.front().queued, last_round_) + opt_.batch_delay;
}

bool CommitQueue::ReadyLocked(Clock::time_point now) const {
  if (queue_.empty()) return false;
  return queue_.size() >= opt_.min_batch || !waiters_.empty() || stop_ ||
         now >= NextRoundLocked();
}

bool CommitQueue::StartForWaiterLocked() {
  if (inflight_ || queue_.empty()) return false;
  inflight_ = true;
  return true;
}

bool CommitQueue::FoldRename(Handle h, Handle src, const std::string& sname, Handle dst,
                             const std::string& dname, const client::Caller& caller, bool* kick) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = queue_.rbegin(); it != queue_.rend(); ++it) {
    Op& o = *it;
    if (!TouchesOp(o.touches, h)) {
      if (TouchesOp(o.touches, dst)) return false;  // the new name must not move before it
      continue;
    }
    CommitOp& q = o.op;
    if (q.handle != h) return false;
    if (q.kind == CommitOp::kCreate && q.parent == src && q.name == sname && dst == src) {
      pending_.Remove(q, o.touches);
      q.name = dname;
      pending_.Add(q, o.touches);
      return true;
    }
    if (q.kind != CommitOp::kRename || q.new_parent != src || q.new_name != sname ||
        (q.parent == dst && q.name == dname)) {
      return false;
    }
    pending_.Remove(q, o.touches);
    q.new_parent = dst;
    q.new_name = dname;
    o.touches = {q.parent, dst, h};
    pending_.Add(q, o.touches);
    if (src != q.parent && src != dst) {
      // The directory passed through: changed, as the rename in and out
      // would have left it.
      CommitOp t;
      t.kind = CommitOp::kSetAttr;
      t.handle = src;
      t.setattr.valid = client::kSetMtimeNow;
      t.caller = caller;
      *kick = EnqueueLocked(std::move(t), ServerOf(src), {src});
    }
    return true;
  }
  return false;
}

bool CommitQueue::DropCreateWriter(Handle h) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = queue_.rbegin(); it != queue_.rend(); ++it) {
    if (!TouchesOp(it->touches, h)) continue;
    if (it->op.kind == CommitOp::kCreate && it->op.handle == h && it->op.create.open_for_write) {
      it->op.create.open_for_write = false;
      return true;
    }
    return false;
  }
  return false;
}

bool CommitQueue::MergeSetAttr(Handle h, const CommitOp& op) {
  using namespace client;
  std::lock_guard<std::mutex> l(mu_);
  int looked = 0;
  for (auto it = queue_.rbegin(); it != queue_.rend() && looked < 8; ++it, ++looked) {
    if (!TouchesOp(it->touches, h)) continue;
    CommitOp& q = it->op;
    // The server applies one setattr's mode before its owner and clears
    // setuid/setgid when the owner changes, then applies a kill: a kill
    // joins nothing and nothing joins it, and a mode with those bits does
    // not join a queued chown (tar: chown, then chmod 4755), so each
    // happens in the order asked.
    const bool sxid_after_chown = (op.setattr.valid & kSetMode) &&
                                  (op.setattr.mode & (S_ISUID | S_ISGID)) != 0 &&
                                  (q.setattr.valid & (kSetUid | kSetGid)) != 0;
    if (q.kind == CommitOp::kSetAttr && q.handle == h && q.caller.uid == op.caller.uid &&
        q.caller.gid == op.caller.gid && q.caller.groups == op.caller.groups &&
        !sxid_after_chown && ((q.setattr.valid | op.setattr.valid) & kKillSuidGid) == 0) {
      const SetAttrArgs& n = op.setattr;
      SetAttrArgs& m = q.setattr;
      if (n.valid & kSetMode) m.mode = n.mode;
      if (n.valid & kSetUid) m.uid = n.uid;
      if (n.valid & kSetGid) m.gid = n.gid;
      if (n.valid & kSetAtime) m.atime = n.atime;
      if (n.valid & kSetMtime) m.mtime = n.mtime;
      m.valid |= n.valid;
      return true;
    }
    return false;  // the file's latest queued change is something else: keep the order
  }
  return false;
}

bool CommitQueue::Touches(Handle h) const {
  std::lock_guard<std::mutex> l(mu_);
  return pending_.Touches(h);
}

bool CommitQueue::TouchesBesidesUnlinks(Handle h) const {
  std::lock_guard<std::mutex> l(mu_);
  return pending_.TouchesBesidesUnlinks(h);
}

bool CommitQueue::NameQueued(Handle dir, const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  return pending_.NameQueued(dir, name);
}

bool CommitQueue::AttrsQueued(Handle h) const {
  std::lock_guard<std::mutex> l(mu_);
  return pending_.AttrsQueued(h);
}

bool CommitQueue::CreateQueued(Handle h) const {
  std::lock_guard<std::mutex> l(mu_);
  return pending_.CreateQueued(h);
}

bool CommitQueue::WaitIf(const std::function<bool(const PendingIndex&)>& queued,
                         std::function<void()> then) {
  bool start = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!queued(pending_)) return false;
    CLF_LOG_DEBUG("after: waiting for the queue ({} queued)", queue_.size());
    waiters_.emplace(next_seq_ - 1, std::move(then));
    start = StartForWaiterLocked();
  }
  if (start) Kick();
  return true;
}

void CommitQueue::Flush(std::function<void()> then) {
  bool start = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (next_seq_ - 1 > done_seq_) {
      waiters_.emplace(next_seq_ - 1, std::move(then));
      start = StartForWaiterLocked();
      then = nullptr;
    }
  }
  if (start) Kick();
  if (then) then();
}

void CommitQueue::Stamp(std::unordered_map<Handle, Clock::time_point>& when, Handle h) {
  const Clock::time_point now = Clock::now();
  if (when.size() >= 65536) {
    std::erase_if(when, [&](const auto& e) { return now - e.second > std::chrono::minutes(1); });
  }
  when[h] = now;
}

void CommitQueue::NoteAttrChange(Handle h) {
  std::lock_guard<std::mutex> l(mu_);
  Stamp(own_attr_change_, h);
}

bool CommitQueue::AttrsChangedSince(Handle h, Clock::time_point t) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = own_attr_change_.find(h);
  return it != own_attr_change_.end() && it->second >= t;
}

bool CommitQueue::NlinkChangedSince(Handle h, Clock::time_point t) const {
  std::lock_guard<std::mutex> l(mu_);
  if (pending_.UnlinksQueued(h)) return true;
  auto it = own_unlink_.find(h);
  return it != own_unlink_.end() && it->second >= t;
}

void CommitQueue::DataLanded() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!blocked_on_data_ || inflight_) return;
    blocked_on_data_ = false;
    inflight_ = true;
  }
  Kick();
}

Status CommitQueue::TakeError(Handle h) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = errors_.find(h);
  if (it == errors_.end()) return Status::Ok();
  Status s = std::move(it->second);
  errors_.erase(it);
  return s;
}

uint64_t CommitQueue::committed() const {
  std::lock_guard<std::mutex> l(mu_);
  return committed_;
}

size_t CommitQueue::queued() const {
  std::lock_guard<std::mutex> l(mu_);
  return queue_.size();
}

bool CommitQueue::WaitsForDataLocked(const Op& o) const {
  // A size report goes after the file's write-behind (M gathers the
  // allocation it reports): it waits; DataLanded resumes it.
  return o.op.kind == CommitOp::kReport && hooks_.data_pending(o.op.handle);
}

size_t CommitQueue::PlanRoundLocked(std::vector<bool>* take) const {
  // The batches: queued changes in queue order, each in its server's
  // batch, passing over reports waiting for data, and any change that
  // touches a file or directory a change passed over or taken for another
  // server touches: that one must be committed first (an rmdir after the
  // unlinks that emptied it on another server). Batches of different
  // servers then share no file or directory, so they may commit in any
  // order; every change still waits only for those it depends on.
  std::unordered_set<Handle> passed;
  std::unordered_map<Handle, ServerId> taken_by;
  std::map<ServerId, size_t> per_server;
  size_t taken = 0;
  const size_t scan = std::min(queue_.size(), 4 * opt_.max_batch);
  take->assign(scan, false);
  for (size_t i = 0; i < scan; ++i) {
    const Op& o = queue_[i];
    bool blocked = WaitsForDataLocked(o) || per_server[o.server] >= opt_.max_batch;
    for (size_t k = 0; !blocked && k < o.touches.size(); ++k) {
      const Handle h = o.touches[k];
      auto t = taken_by.find(h);
      blocked = passed.count(h) != 0 || (t != taken_by.end() && t->second != o.server);
    }
    if (blocked) {
      passed.insert(o.touches.begin(), o.touches.end());
      continue;
    }
    for (Handle h : o.touches) taken_by[h] = o.server;
    ++per_server[o.server];
    (*take)[i] = true;
    ++taken;
  }
  return taken;
}

void CommitQueue::Kick() {
  // One batch per server, sent side by side; the next round starts when the
  // last of them is back.
  std::map<ServerId, std::vector<Op>> batches;
  Clock::time_point sent;
  // Files whose waiting size reports need their data on the servers: sent
  // once the lock is released.
  std::vector<Handle> need_data;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!ReadyLocked(Clock::now())) {
      inflight_ = false;
      if (!queue_.empty()) cv_.notify_all();  // the timer sends it
      return;
    }
    std::vector<bool> take;
    const size_t taken = PlanRoundLocked(&take);
    if (taken == 0) {
      inflight_ = false;
      blocked_on_data_ = true;
      for (size_t i = 0; i < take.size(); ++i) {
        if (WaitsForDataLocked(queue_[i])) need_data.push_back(queue_[i].op.handle);
      }
    } else {
      std::deque<Op> rest;
      for (size_t i = 0; i < queue_.size(); ++i) {
        if (i < take.size() && take[i]) {
          batches[queue_[i].server].push_back(std::move(queue_[i]));
        } else {
          rest.push_back(std::move(queue_[i]));
        }
      }
      sent = Clock::now();
      last_round_ = sent;
      CLF_LOG_DEBUG(
          "commit: {} of {} queued changes in {} batches (oldest {} us old, {} waiting)", taken,
          queue_.size(), batches.size(),
          std::chrono::duration_cast<std::chrono::microseconds>(sent - queue_.front().queued)
              .count(),
          waiters_.size());
      queue_.swap(rest);
      batches_out_ = batches.size();
      for (const auto& [server, b] : batches) inflight_first_.insert(b.front().seq);
    }
  }
  if (!need_data.empty()) {
    hooks_.send_data(need_data);
    return;
  }
  for (size_t k = 0; k < batches.size(); ++k) hooks_.call_begin();
  for (auto& [server, batch] : batches) SendBatch(server, std::move(batch), sent);
}

void CommitQueue::SendBatch(ServerId s, std::vector<Op> batch, Clock::time_point sent) {
  std::vector<CommitOp> ops;
  ops.reserve(batch.size());
  for (const Op& o : batch) ops.push_back(o.op);
  auto kept = std::make_shared<std::vector<Op>>(std::move(batch));
  hooks_.commit(s, std::move(ops), [this, s, kept, sent](Result<std::vector<Status>> r) {
    OnAnswered(s, *kept, r, sent);
    hooks_.call_end();
  });
}

void CommitQueue::OnAnswered(ServerId s, const std::vector<Op>& batch,
                             const Result<std::vector<Status>>& r, Clock::time_point sent) {
  bool last = false;
  std::vector<std::function<void()>> ready;
  std::vector<Handle> give_back;
  std::vector<CommitOp> ops;
  std::vector<Status> statuses;
  ops.reserve(batch.size());
  statuses.reserve(batch.size());
  {
    std::lock_guard<std::mutex> l(mu_);
    for (size_t i = 0; i < batch.size(); ++i) {
      const Op& o = batch[i];
      Status st = !r.ok() ? r.status() : i < r->size() ? (*r)[i] : Status(Code::kIo, "no answer");
      if (!st.ok()) {
        CLF_LOG_WARN("deferred {} {:#x} {} failed: {}", KindName(o.op.kind),
                     o.op.parent != 0 ? o.op.parent : o.op.handle, o.op.name, st.ToString());
        // Reported by the next fsync of the file and the next fsyncdir of
        // each directory the change was in (a rename's two), once each.
        const Status lost =
            Status(Code::kIo, "a change acknowledged earlier failed: " + st.ToString());
        for (Handle h : {o.op.handle, o.op.parent, o.op.new_parent}) {
          if (h != 0) errors_[h] = lost;
        }
        // The listing may be wrong now: stop answering for the directory.
        if (o.op.parent != 0) give_back.push_back(o.op.parent);
        if (o.op.new_parent != 0) give_back.push_back(o.op.new_parent);
      } else {
        ++committed_;
      }
      pending_.Remove(o.op, o.touches);
      if (o.op.kind == CommitOp::kSetAttr) {
        // A server answer asked for before now may have read the file
        // before this commit (AttrsChangedSince).
        Stamp(own_attr_change_, o.op.handle);
      }
      if (o.op.kind == CommitOp::kRemove && !o.op.directory && o.op.handle != 0) {
        Stamp(own_unlink_, o.op.handle);
      }
      ops.push_back(o.op);
      statuses.push_back(std::move(st));
    }
    // Everything before the oldest change still queued or on the wire is committed.
    inflight_first_.erase(inflight_first_.find(batch.front().seq));
    uint64_t oldest = queue_.empty() ? next_seq_ : queue_.front().seq;
    if (!inflight_first_.empty()) oldest = std::min(oldest, *inflight_first_.begin());
    done_seq_ = oldest - 1;
    last = --batches_out_ == 0;
    while (!waiters_.empty() && waiters_.begin()->first <= done_seq_) {
      ready.push_back(std::move(waiters_.begin()->second));
      waiters_.erase(waiters_.begin());
    }
  }
  hooks_.answered(ops, statuses, sent);
  for (auto& f : ready) f();
  if (!give_back.empty()) {
    std::sort(give_back.begin(), give_back.end());
    give_back.erase(std::unique(give_back.begin(), give_back.end()), give_back.end());
    hooks_.give_back(s, std::move(give_back));
  }
  if (last) Kick();
}

void CommitQueue::TimerLoop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    if (inflight_ || queue_.empty()) {
      cv_.wait(l);
      continue;
    }
    // Reports waiting for their data (DataLanded resumes them): the rest of
    // the queue is looked at again every batch_delay meanwhile.
    Clock::time_point wake = NextRoundLocked();
    if (blocked_on_data_) wake = std::max(wake, Clock::now() + opt_.batch_delay);
    cv_.wait_until(l, wake);
    if (stop_) break;
    if (!inflight_ && ReadyLocked(Clock::now())) {
      inflight_ = true;
      l.unlock();
      Kick();
      l.lock();
    }
  }
}

}  // namespace clf::fuse
