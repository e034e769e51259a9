#include "fuse/write_behind.h"

#include <algorithm>

#include "common/log.h"

namespace clf::fuse {

namespace {
// Whether [offset, end) overlaps one of the disjoint ranges of `m` (off -> end).
bool Overlaps(const std::map<uint64_t, uint64_t>& m, uint64_t offset, uint64_t end) {
  auto it = m.lower_bound(end);  // the first range starting at or after end
  if (it == m.begin()) return false;
  --it;  // the last range starting before end
  return it->second > offset;
}
}  // namespace

WriteBehind::WriteBehind(Options o, bool start_timer) : opt_(o) {
  if (start_timer) timer_ = std::thread([this] { TimerLoop(); });
}

WriteBehind::~WriteBehind() { Stop(); }

void WriteBehind::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (timer_.joinable()) timer_.join();
}

void WriteBehind::SetSender(Sender s) {
  std::lock_guard<std::mutex> l(mu_);
  send_ = std::move(s);
}

bool WriteBehind::has_sender() const {
  std::lock_guard<std::mutex> l(mu_);
  return send_ != nullptr;
}

void WriteBehind::TakeRunLocked(Handle ino, size_t i, Sends* out) {
  auto r = runs_.find(ino);
  if (r == runs_.end() || i >= r->second.size()) return;
  Run run = std::move(r->second[i]);
  r->second.erase(r->second.begin() + static_cast<long>(i));
  if (r->second.empty()) runs_.erase(r);
  writes_[ino].emplace(run.offset, run.offset + run.data.size());
  ++writes_total_;
  out->push_back(Send{ino, std::move(run)});
}

void WriteBehind::TakeRunsLocked(Handle ino, Sends* out) {
  auto r = runs_.find(ino);
  if (r == runs_.end()) return;
  std::vector<Run> runs = std::move(r->second);
  runs_.erase(r);
  auto& w = writes_[ino];
  for (Run& run : runs) {
    w.emplace(run.offset, run.offset + run.data.size());
    ++writes_total_;
    out->push_back(Send{ino, std::move(run)});
  }
}

void WriteBehind::Take(Handle ino, Sends* out) {
  std::lock_guard<std::mutex> l(mu_);
  TakeRunsLocked(ino, out);
}

void WriteBehind::SendAll(Sends sends) {
  if (sends.empty()) return;
  Sender send;
  {
    std::lock_guard<std::mutex> l(mu_);
    send = send_;
  }
  for (Send& s : sends) {
    CLF_LOG_DEBUG("write-behind {:#x} off {} len {}: sent", s.ino, s.run.offset, s.run.data.size());
    send(s.ino, s.run.layout, s.run.offset, std::move(s.run.data));
  }
}

WriteBehind::Mode WriteBehind::Offer(Handle ino, const Layout& layout, uint64_t offset,
                                     std::string* data, bool eligible, Sends* out) {
  const uint64_t bytes = data->size();
  const uint64_t end = offset + bytes;
  std::lock_guard<std::mutex> l(mu_);
  // The run this write continues, if any; a run it overlaps otherwise goes
  // out now (and the write waits for it below).
  size_t cont = SIZE_MAX;
  auto rs = runs_.find(ino);
  if (rs != runs_.end()) {
    for (size_t i = 0; i < rs->second.size();) {
      const Run& r = rs->second[i];
      const uint64_t rend = r.offset + r.data.size();
      if (rend == offset && r.data.size() + bytes <= opt_.run_bytes && cont == SIZE_MAX) {
        cont = i++;
      } else if (offset < rend && r.offset < end) {
        const bool last = rs->second.size() == 1;
        TakeRunLocked(ino, i, out);
        if (cont != SIZE_MAX && cont > i) --cont;
        if (last) break;
      } else {
        ++i;
      }
    }
  }
  auto in = writes_.find(ino);
  if (in != writes_.end() && Overlaps(in->second, offset, end)) return Mode::kWaitFirst;
  eligible = eligible && send_ != nullptr && bytes > 0;
  if (!eligible || bytes_ + bytes > opt_.max_bytes) {
    // Not behind: after the ones in flight (a sync write must not overtake them).
    TakeRunsLocked(ino, out);
    return writes_.count(ino) != 0 ? Mode::kWaitFirst : Mode::kSync;
  }
  if (cont != SIZE_MAX) {
    Run& r = runs_[ino][cont];
    r.data.append(*data);
    bytes_ += bytes;
    if (r.data.size() >= opt_.run_bytes) TakeRunLocked(ino, cont, out);
    return Mode::kBehind;
  }
  if (runs_[ino].size() >= opt_.runs_per_file) TakeRunLocked(ino, 0, out);  // the oldest
  std::vector<Run>& w = runs_[ino];
  Run r;
  r.layout = layout;
  r.offset = offset;
  r.data = std::move(*data);
  r.started = Clock::now();
  bytes_ += bytes;
  w.push_back(std::move(r));
  if (w.back().data.size() >= opt_.run_bytes) {
    TakeRunLocked(ino, w.size() - 1, out);
  } else if (runs_.size() == 1 && w.size() == 1) {
    cv_.notify_all();  // the timer sends it once it is run_age old
  }
  return Mode::kBehind;
}

bool WriteBehind::EndWrite(Handle ino, uint64_t offset, uint64_t bytes, const Status& s) {
  std::vector<std::function<void()>> run;
  bool idle = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!s.ok()) {
      CLF_LOG_WARN("write-behind to {:#x} failed: {}", ino, s.ToString());
      errors_[ino] = Status(Code::kIo, "a write acknowledged earlier failed: " + s.ToString());
    }
    bytes_ -= bytes;
    auto it = writes_.find(ino);
    if (it != writes_.end()) {
      auto& v = it->second;
      auto r = v.find(offset);
      if (r != v.end() && r->second == offset + bytes) v.erase(r);
      if (v.empty()) {
        writes_.erase(it);
        auto w = waiters_.find(ino);
        if (w != waiters_.end()) {
          run = std::move(w->second);
          waiters_.erase(w);
        }
      }
    }
    idle = writes_.count(ino) == 0;
    if (--writes_total_ == 0) {
      for (auto& f : all_waiters_) run.push_back(std::move(f));
      all_waiters_.clear();
    }
  }
  for (auto& f : run) f();
  return idle;
}

bool WriteBehind::AfterWrites(Handle ino, std::function<void()> then) {
  Sends sends;
  {
    std::lock_guard<std::mutex> l(mu_);
    TakeRunsLocked(ino, &sends);
    if (writes_.count(ino) == 0) return false;
    waiters_[ino].push_back(std::move(then));
  }
  SendAll(std::move(sends));
  return true;
}

void WriteBehind::FlushAll(std::function<void()> then) {
  Sends sends;
  {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<Handle> gathering;
    for (const auto& [h, r] : runs_) gathering.push_back(h);
    for (Handle h : gathering) TakeRunsLocked(h, &sends);
    if (writes_total_ > 0) {
      // Runs gathered meanwhile go out then too.
      all_waiters_.push_back(
          [this, then = std::move(then)]() mutable { FlushAll(std::move(then)); });
      then = nullptr;
    }
  }
  SendAll(std::move(sends));
  if (then) then();
}

bool WriteBehind::Has(Handle ino) const {
  std::lock_guard<std::mutex> l(mu_);
  return writes_.count(ino) != 0 || runs_.count(ino) != 0;
}

bool WriteBehind::InFlight(Handle ino) const {
  std::lock_guard<std::mutex> l(mu_);
  return writes_.count(ino) != 0;
}

uint64_t WriteBehind::End(Handle ino) const {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t end = 0;
  auto r = runs_.find(ino);
  if (r != runs_.end()) {
    for (const Run& run : r->second) end = std::max(end, run.offset + run.data.size());
  }
  auto in = writes_.find(ino);
  if (in != writes_.end() && !in->second.empty()) {
    // Disjoint ranges sorted by offset: the last one ends last.
    end = std::max(end, in->second.rbegin()->second);
  }
  return end;
}

Status WriteBehind::TakeError(Handle ino) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = errors_.find(ino);
  if (it == errors_.end()) return Status::Ok();
  Status s = std::move(it->second);
  errors_.erase(it);
  return s;
}

uint64_t WriteBehind::bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return bytes_;
}

void WriteBehind::TimerLoop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    Clock::time_point wake = Clock::time_point::max();
    for (const auto& [h, v] : runs_) {
      for (const Run& r : v) wake = std::min(wake, r.started + opt_.run_age);
    }
    if (wake == Clock::time_point::max()) {
      cv_.wait(l);
    } else {
      cv_.wait_until(l, wake);
    }
    if (stop_) break;
    const Clock::time_point now = Clock::now();
    std::vector<Handle> old;
    for (const auto& [h, v] : runs_) {
      for (const Run& r : v) {
        if (now >= r.started + opt_.run_age) {
          old.push_back(h);
          break;
        }
      }
    }
    if (old.empty()) continue;
    Sends sends;
    for (Handle h : old) TakeRunsLocked(h, &sends);
    l.unlock();
    SendAll(std::move(sends));
    l.lock();
  }
}

}  // namespace clf::fuse
