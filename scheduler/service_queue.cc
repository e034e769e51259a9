#include "scheduler/service_queue.h"

#include <algorithm>

#include "common/status.h"

namespace clf::scheduler {

void ServiceQueue::Add(const Block& b) { waiting_.push_back(Entry{b, next_seq_++, 0}); }

bool ServiceQueue::Remove(uint64_t id) {
  auto it = std::find_if(waiting_.begin(), waiting_.end(),
                         [id](const Entry& e) { return e.block.id == id; });
  if (it == waiting_.end()) return false;
  waiting_.erase(it);
  return true;
}

size_t ServiceQueue::PickIndex() {
  // waiting_ is in arrival order, so the first match of a scan is the oldest.
  for (size_t i = 0; i < waiting_.size(); ++i) {
    if (max_bypass_ > 0 && waiting_[i].bypassed >= max_bypass_) return i;
  }
  switch (waiting_.front().block.policy) {
    case OrderPolicy::kFirstIos: {
      size_t best = 0;
      for (size_t i = 1; i < waiting_.size(); ++i) {
        const Block& a = waiting_[i].block;
        const Block& b = waiting_[best].block;
        if (a.handle < b.handle || (a.handle == b.handle && a.offset < b.offset)) best = i;
      }
      return best;
    }
    case OrderPolicy::kHashIos: {
      // The oldest block of the first waiting rank at or after the cursor, cyclically.
      size_t at_or_after = waiting_.size(), lowest = 0;
      for (size_t i = 0; i < waiting_.size(); ++i) {
        const uint32_t c = waiting_[i].block.client;
        if (c >= cursor_ &&
            (at_or_after == waiting_.size() || c < waiting_[at_or_after].block.client)) {
          at_or_after = i;
        }
        if (c < waiting_[lowest].block.client) lowest = i;
      }
      const size_t pick = at_or_after < waiting_.size() ? at_or_after : lowest;
      cursor_ = waiting_[pick].block.client + 1;
      return pick;
    }
    case OrderPolicy::kRandomIos: {
      std::vector<uint32_t> clients;
      for (const Entry& e : waiting_) clients.push_back(e.block.client);
      std::sort(clients.begin(), clients.end());
      clients.erase(std::unique(clients.begin(), clients.end()), clients.end());
      const uint32_t c = clients[rng_.Uniform(clients.size())];
      for (size_t i = 0; i < waiting_.size(); ++i) {
        if (waiting_[i].block.client == c) return i;
      }
      break;
    }
  }
  return 0;
}

ServiceQueue::Block ServiceQueue::Pop() {
  CLF_CHECK(!waiting_.empty());
  const size_t pick = PickIndex();
  for (size_t i = 0; i < pick; ++i) ++waiting_[i].bypassed;  // older ones passed over
  Block b = waiting_[pick].block;
  waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(pick));
  return b;
}

}  // namespace clf::scheduler
