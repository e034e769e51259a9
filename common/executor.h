// A fixed pool of threads running submitted closures in FIFO order.
// Thread safety: Submit may be called from any thread, including pool threads.
// Shutdown() runs everything already queued, then joins; later Submits are dropped.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace clf {

class Executor {
 public:
  Executor(std::string name, size_t threads);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void Submit(std::function<void()> fn);
  void Shutdown();
  size_t queued() const;

 private:
  void Run();
  std::string name_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace clf
