#include "server/store/handle_allocator.h"

#include <algorithm>

namespace clf::server {

void HandleAllocator::Recover(uint64_t min_counter) {
  std::lock_guard<std::mutex> l(mu_);
  // Every counter up to here may be in use or handed out, and is durable.
  const uint64_t durable = std::max(store_->MaxCounter(self_), store_->HandleHighWater());
  counter_.store(std::max(durable, min_counter));
  limit_ = durable;
}

Result<Handle> HandleAllocator::Reserve(uint32_t count) {
  std::lock_guard<std::mutex> l(mu_);
  const uint64_t first = counter_.load() + 1;
  const uint64_t last = first + std::max<uint32_t>(count, 1) - 1;
  if (last > kCounterMask) return Status(Code::kNoSpace, "handle counter exhausted");
  if (last > limit_) {
    const uint64_t limit = std::min<uint64_t>(kCounterMask, last + kBlock);
    RocksMetaStore::Batch b;
    b.PutHandleHighWater(limit);
    CLF_RETURN_IF_ERROR(store_->Commit(b));
    limit_ = limit;
  }
  counter_.store(last);
  return MakeHandle(self_, first);
}

}  // namespace clf::server
