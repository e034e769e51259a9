#include "scheduler/decentralized_run.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <tuple>
#include <utility>

namespace clf::scheduler {

DecentralizedRun RunDecentralized(int num_receivers,
                                  const std::vector<std::vector<OutgoingBlock>>& sequences,
                                  const std::vector<Time>& sender_available,
                                  const std::vector<Time>& receiver_available) {
  const int num_senders = static_cast<int>(sequences.size());
  DecentralizedRun run;
  run.start.resize(num_senders);
  for (int s = 0; s < num_senders; ++s) run.start[s].assign(sequences[s].size(), 0);

  enum Kind : int { kEnd = 0, kIssue = 1, kWake = 2 };
  using Event = std::tuple<Time, int, int>;  // (time, kind, sender or receiver)
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  using Waiting = std::pair<Time, int>;  // (issued at, sender)
  std::vector<std::priority_queue<Waiting, std::vector<Waiting>, std::greater<>>> waiting(
      num_receivers);
  std::vector<int> serving(num_receivers, -1);  // sender being served, or -1
  std::vector<char> wake_pending(num_receivers, 0);
  std::vector<size_t> next(num_senders, 0);  // index of the block a sender is on

  for (int s = 0; s < num_senders; ++s) {
    if (!sequences[s].empty()) {
      events.emplace(sender_available.empty() ? 0 : sender_available[s], kIssue, s);
    }
  }
  std::vector<int> touched;
  while (!events.empty()) {
    const Time now = std::get<0>(events.top());
    touched.clear();
    // Everything that happens at `now` first, then receivers pick.
    while (!events.empty() && std::get<0>(events.top()) == now) {
      const auto [time, kind, id] = events.top();
      events.pop();
      if (kind == kWake) {
        wake_pending[id] = 0;
        touched.push_back(id);
        continue;
      }
      int s = id;
      if (kind == kEnd) {
        const int r = sequences[s][next[s]].receiver;
        serving[r] = -1;
        touched.push_back(r);
        if (++next[s] == sequences[s].size()) continue;
      }
      const int r = sequences[s][next[s]].receiver;
      waiting[r].emplace(now, s);
      touched.push_back(r);
    }
    for (int r : touched) {
      if (serving[r] >= 0 || waiting[r].empty()) continue;
      const Time avail = receiver_available.empty() ? 0 : receiver_available[r];
      if (now < avail) {
        if (!wake_pending[r]) {
          wake_pending[r] = 1;
          events.emplace(avail, kWake, r);
        }
        continue;
      }
      const int s = waiting[r].top().second;
      waiting[r].pop();
      serving[r] = s;
      run.start[s][next[s]] = now;
      const Time end = now + sequences[s][next[s]].size;
      run.length = std::max(run.length, end);
      events.emplace(end, kEnd, s);
    }
  }
  return run;
}

}  // namespace clf::scheduler
