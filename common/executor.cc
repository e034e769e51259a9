#include "common/executor.h"

#include <pthread.h>

namespace clf {

Executor::Executor(std::string name, size_t threads) : name_(std::move(name)) {
  for (size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this, i] {
      std::string tname = (name_ + std::to_string(i)).substr(0, 15);
      pthread_setname_np(pthread_self(), tname.c_str());
      Run();
    });
  }
}

Executor::~Executor() { Shutdown(); }

void Executor::Submit(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return;
    q_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

size_t Executor::queued() const {
  std::lock_guard<std::mutex> l(mu_);
  return q_.size();
}

void Executor::Run() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;  // stopping and drained
      fn = std::move(q_.front());
      q_.pop_front();
    }
    fn();
  }
}

void Executor::Shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_ && threads_.empty()) return;
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
  }
  threads_.clear();
}

}  // namespace clf
