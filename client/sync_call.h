// Waits for an asynchronous client call: Wait<T>(start) calls start(cb) and
// blocks until cb(Result<T>) ran, returning that result; WaitStatus the same
// for a StatusCallback. The call must invoke its callback exactly once.
#pragma once

#include <future>
#include <utility>

#include "common/status.h"

namespace clf::client {

template <typename T, typename Start>
Result<T> Wait(Start start) {
  std::promise<Result<T>> p;
  auto f = p.get_future();
  start([&p](Result<T> r) { p.set_value(std::move(r)); });
  return f.get();
}

template <typename Start>
Status WaitStatus(Start start) {
  std::promise<Status> p;
  auto f = p.get_future();
  start([&p](Status s) { p.set_value(std::move(s)); });
  return f.get();
}

}  // namespace clf::client
