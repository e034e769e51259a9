#include "server/ops/dir_leases.h"

#include <algorithm>

namespace clf::server {

namespace {
constexpr auto kSweepEvery = std::chrono::milliseconds(20);

void RunAll(std::vector<std::function<void()>>& run) {
  for (auto& f : run) f();
  run.clear();
}
}  // namespace

DirLeases::DirLeases(uint32_t lease_ms) : lease_ms_(lease_ms) {
  sweeper_ = std::thread([this] { SweepLoop(); });
}

DirLeases::~DirLeases() { Stop(); }

void DirLeases::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  sweeper_.join();
  // Parked requests and polls still run (their calls must finish).
  std::vector<std::function<void()>> run;
  std::vector<EventsDone> polls;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& [dir, lease] : leases_) {
      for (auto& f : lease.parked) run.push_back(std::move(f));
    }
    leases_.clear();
    for (auto& [s, ev] : sessions_) {
      if (ev.has_poll) polls.push_back(std::move(ev.poll.done));
    }
    sessions_.clear();
  }
  RunAll(run);
  for (auto& p : polls) p({});
}

bool DirLeases::Acquire(uint64_t session, Handle dir) {
  if (session == 0) return false;
  std::vector<std::function<void()>> run;
  bool granted = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return false;
    const Clock::time_point now = Clock::now();
    auto it = leases_.find(dir);
    if (it != leases_.end() && it->second.expires <= now) {
      for (auto& f : it->second.parked) run.push_back(std::move(f));
      leases_.erase(it);
      it = leases_.end();
    }
    if (it == leases_.end()) {
      if (mutating_.count(dir) == 0) {  // else a change of another client is in flight
      Lease& lease = leases_[dir];
      lease.session = session;
      lease.expires = now + std::chrono::milliseconds(lease_ms_);
      granted = true;
      }
    } else if (it->second.session == session && !it->second.recalled) {
      it->second.expires = now + std::chrono::milliseconds(lease_ms_);
      granted = true;
    }
  }
  RunAll(run);  // requests parked on an expired lease: re-admitted (they park again)
  return granted;
}

void DirLeases::Release(uint64_t session, Handle dir) {
  std::vector<std::function<void()>> run;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = leases_.find(dir);
    if (it == leases_.end() || it->second.session != session) return;
    run = std::move(it->second.parked);
    leases_.erase(it);
  }
  RunAll(run);
}

void DirLeases::EndSession(uint64_t session) {
  std::vector<std::function<void()>> run;
  EventsDone poll;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = leases_.begin(); it != leases_.end();) {
      if (it->second.session == session) {
        for (auto& f : it->second.parked) run.push_back(std::move(f));
        it = leases_.erase(it);
      } else {
        ++it;
      }
    }
    auto s = sessions_.find(session);
    if (s != sessions_.end()) {
      if (s->second.has_poll) poll = std::move(s->second.poll.done);
      sessions_.erase(s);
    }
  }
  RunAll(run);
  if (poll) poll({});
}

bool DirLeases::HoldsAndRenew(uint64_t session, Handle dir) {
  if (session == 0) return false;
  std::lock_guard<std::mutex> l(mu_);
  auto it = leases_.find(dir);
  const Clock::time_point now = Clock::now();
  if (it == leases_.end() || it->second.session != session || it->second.expires <= now) {
    return false;
  }
  // A recalled lease is not extended: its holder has what is left to commit.
  if (!it->second.recalled) it->second.expires = now + std::chrono::milliseconds(lease_ms_);
  return true;
}

void DirLeases::RecallLocked(Handle dir, Lease& lease, std::vector<std::function<void()>>* run) {
  if (lease.recalled) return;
  lease.recalled = true;
  SessionEvents& ev = sessions_[lease.session];
  ev.recalled.push_back(dir);
  if (ev.has_poll) {
    ev.has_poll = false;
    run->push_back([done = std::move(ev.poll.done), dirs = std::move(ev.recalled)]() mutable {
      done(std::move(dirs));
    });
    ev.recalled.clear();
  }
}

void DirLeases::Done(const std::vector<Handle>& dirs) {
  std::lock_guard<std::mutex> l(mu_);
  for (Handle d : dirs) {
    auto it = mutating_.find(d);
    if (it != mutating_.end() && --it->second == 0) mutating_.erase(it);
  }
}

void DirLeases::Admit(uint64_t session, std::vector<Handle> dirs, bool mutation,
                      std::function<void()> go) {
  std::vector<std::function<void()>> run;
  bool now_ok = true;
  {
    std::lock_guard<std::mutex> l(mu_);
    const Clock::time_point now = Clock::now();
    for (Handle dir : dirs) {
      auto it = leases_.find(dir);
      if (it == leases_.end() || (session != 0 && it->second.session == session)) continue;
      if (it->second.expires <= now) {
        for (auto& f : it->second.parked) run.push_back(std::move(f));
        leases_.erase(it);
        continue;
      }
      // Parked: admitted again once the lease is gone (another dir may still be leased).
      it->second.parked.push_back([this, session, dirs, mutation, go = std::move(go)]() mutable {
        Admit(session, std::move(dirs), mutation, std::move(go));
      });
      RecallLocked(dir, it->second, &run);
      now_ok = false;
      break;
    }
    if (now_ok && mutation) {
      for (Handle dir : dirs) ++mutating_[dir];
    }
  }
  RunAll(run);
  if (now_ok) go();
}

void DirLeases::WaitEvents(uint64_t session, uint32_t wait_ms, EventsDone done) {
  std::vector<Handle> ready;
  EventsDone replaced;     // an older poll of the session, answered empty
  bool answer_now = true;  // stopped, or recalls already waiting
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!stop_) {
      SessionEvents& ev = sessions_[session];
      if (ev.has_poll) {
        replaced = std::move(ev.poll.done);
        ev.has_poll = false;
      }
      if (ev.recalled.empty()) {
        ev.has_poll = true;
        ev.poll.done = std::move(done);
        ev.poll.until = Clock::now() + std::chrono::milliseconds(wait_ms);
        answer_now = false;
      } else {
        ready.swap(ev.recalled);
      }
    }
  }
  if (replaced) replaced({});
  if (answer_now) done(std::move(ready));
}

size_t DirLeases::held() const {
  std::lock_guard<std::mutex> l(mu_);
  return leases_.size();
}

void DirLeases::SweepLoop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, kSweepEvery);
    if (stop_) break;
    const Clock::time_point now = Clock::now();
    std::vector<std::function<void()>> run;
    std::vector<EventsDone> polls;
    for (auto it = leases_.begin(); it != leases_.end();) {
      if (it->second.expires <= now) {
        for (auto& f : it->second.parked) run.push_back(std::move(f));
        it = leases_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      SessionEvents& ev = it->second;
      if (ev.has_poll && ev.poll.until <= now) {
        ev.has_poll = false;
        polls.push_back(std::move(ev.poll.done));
      }
      if (!ev.has_poll && ev.recalled.empty()) {
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
    if (run.empty() && polls.empty()) continue;
    l.unlock();
    RunAll(run);
    for (auto& p : polls) p({});
    l.lock();
  }
}

}  // namespace clf::server
