#include "server/ops/resync.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace clf::server {

int64_t Resyncer::NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Resyncer::Resyncer(Replication* replication)
    : replication_(replication), worker_([this] { Run(); }) {}

Resyncer::~Resyncer() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void Resyncer::Enqueue(Handle h) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ || !queued_.insert(h).second) return;
    queue_.push_back(h);
  }
  cv_.notify_one();
}

void Resyncer::Run() {
  // Nice 10, as the reaper: on a busy server the clients' requests get the
  // CPU first (the copying is CPU as much as disk: read, send, receive, write).
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10) != 0) {
    CLF_LOG_WARN("resync thread: setpriority: {}", std::strerror(errno));
  }
  for (;;) {
    Handle h;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      h = queue_.front();
      queue_.pop_front();
      queued_.erase(h);
    }
    Result<std::vector<Replication::CopyWork>> work = replication_->ResyncWork(h);
    if (!work.ok()) {
      CLF_LOG_DEBUG("resync of {}: {}", h, work.status().ToString());
      continue;
    }
    for (const Replication::CopyWork& w : *work) {
      busy_ = true;
      Status st = One(w);
      busy_ = false;
      if (st.ok()) {
        resynced_.fetch_add(1, std::memory_order_relaxed);
      } else {
        failed_.fetch_add(1, std::memory_order_relaxed);
        CLF_LOG_INFO("resync of copy {} of server {}'s units of {}: {} (retried later)", w.to,
                     w.primary, h, st.ToString());
      }
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) return;
    }
  }
}

Status Resyncer::One(const Replication::CopyWork& w) {
  uint64_t off = 0;
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) return Status(Code::kCancelled, "stopping");
    }
    const auto t0 = std::chrono::steady_clock::now();
    CLF_ASSIGN_OR_RETURN(uint64_t n, replication_->CopyRange(w, off, kChunk));
    if (n == 0) break;
    off += n;
    bytes_.fetch_add(n, std::memory_order_relaxed);
    const auto took = std::chrono::steady_clock::now() - t0;
    if (NowMs() - last_foreground_ms_.load(std::memory_order_relaxed) < kBusyMs) {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, kPauseFactor * took, [&] { return stop_; });
    }
  }
  CLF_ASSIGN_OR_RETURN(uint64_t more, replication_->FinishCopy(w, off));
  bytes_.fetch_add(more, std::memory_order_relaxed);
  return Status::Ok();
}

}  // namespace clf::server
