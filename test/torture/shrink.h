// Delta debugging (ddmin) of a failing operation sequence: drops chunks while
// what is left still fails, within a time budget.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace clf::torture {

// `fails(ops, trial)`: runs `ops` afresh (trial numbers its directories) and
// says whether they still fail.
template <typename Op>
std::vector<Op> Shrink(std::vector<Op> ops,
                       const std::function<bool(const std::vector<Op>&, int)>& fails,
                       int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  auto time_left = [&] { return std::chrono::steady_clock::now() < deadline; };
  size_t chunks = 2;
  int trial = 0;
  while (ops.size() >= 2 && time_left()) {
    const size_t chunk = (ops.size() + chunks - 1) / chunks;
    bool reduced = false;
    for (size_t start = 0; start < ops.size() && time_left(); start += chunk) {
      std::vector<Op> rest(ops.begin(), ops.begin() + static_cast<long>(start));
      rest.insert(rest.end(), ops.begin() + static_cast<long>(std::min(start + chunk, ops.size())),
                  ops.end());
      if (fails(rest, trial++)) {
        ops = std::move(rest);
        chunks = std::max<size_t>(chunks - 1, 2);
        reduced = true;
        break;
      }
    }
    if (!reduced) {
      if (chunks >= ops.size()) break;
      chunks = std::min(chunks * 2, ops.size());
    }
  }
  return ops;
}

}  // namespace clf::torture
