#include "client/server_load.h"

#include <cmath>

#include "scheduler/copy_plan.h"

namespace clf::client {

void ServerLoad::Start(ServerId s, uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  if (s < in_flight_.size()) in_flight_[s] += bytes;
}

void ServerLoad::Finish(ServerId s, uint64_t bytes, std::chrono::steady_clock::duration took,
                        bool ok) {
  std::lock_guard<std::mutex> l(mu_);
  if (s >= in_flight_.size()) return;
  in_flight_[s] -= std::min(in_flight_[s], bytes);
  const double secs = std::chrono::duration<double>(took).count();
  if (!ok || bytes < scheduler::kCopyPlanUnit || secs <= 0) return;
  // A moving average over about the last eight requests.
  const double r = static_cast<double>(bytes) / secs;
  rate_[s] = rate_[s] == 0 ? r : rate_[s] * 0.875 + r * 0.125;
}

std::vector<scheduler::Time> ServerLoad::Available() const {
  std::lock_guard<std::mutex> l(mu_);
  double sum = 0;
  int measured = 0;
  for (double r : rate_) {
    if (r > 0) sum += r, ++measured;
  }
  const double mean = measured > 0 ? sum / measured : 0;
  std::vector<scheduler::Time> out(in_flight_.size(), 0);
  for (size_t s = 0; s < in_flight_.size(); ++s) {
    double units = static_cast<double>(in_flight_[s]) / scheduler::kCopyPlanUnit;
    if (rate_[s] > 0 && mean > 0) units *= mean / rate_[s];
    out[s] = static_cast<scheduler::Time>(std::ceil(units));
  }
  return out;
}

}  // namespace clf::client
