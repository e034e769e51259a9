#include "fuse/walk_cache.h"

#include <cstring>

namespace clf::fuse {

WalkCache::WalkCache(Clock::duration ttl, size_t max_entries)
    : ttl_(ttl), max_entries_(max_entries) {}

std::string WalkCache::Key(uint64_t parent, const std::string& name) {
  std::string k(sizeof(parent), '\0');
  std::memcpy(k.data(), &parent, sizeof(parent));
  k += name;
  return k;
}

void WalkCache::Note(uint64_t parent, const std::string& name, uint64_t child) {
  if (ttl_ <= Clock::duration::zero()) return;
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (names_.size() >= max_entries_) PruneLocked(now);
  names_[Key(parent, name)] = Walked{child, now};
}

std::optional<uint64_t> WalkCache::Find(uint64_t parent, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = names_.find(Key(parent, name));
  if (it == names_.end() || Clock::now() - it->second.noted >= ttl_) return std::nullopt;
  return it->second.child;
}

void WalkCache::Forget(uint64_t parent, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  names_.erase(Key(parent, name));
}

size_t WalkCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return names_.size();
}

void WalkCache::PruneLocked(Clock::time_point now) {
  std::erase_if(names_, [&](const auto& kv) { return now - kv.second.noted >= ttl_; });
  if (names_.size() >= max_entries_) names_.clear();
}

}  // namespace clf::fuse
