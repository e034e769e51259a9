#include "client/dir_attr_cache.h"

#include "client/proto_convert.h"

namespace clf::client {

void DirAttrCache::Put(const v1::Attr& a) {
  if (max_age_ms_ == 0 || a.handle() == 0 || a.type() != v1::FT_DIRECTORY) return;
  std::lock_guard<std::mutex> l(mu_);
  if (map_.size() > kMaxEntries) map_.clear();
  map_[a.handle()] = {FromProto(a), std::chrono::steady_clock::now()};
}

void DirAttrCache::Forget(Handle h) {
  if (max_age_ms_ == 0) return;
  std::lock_guard<std::mutex> l(mu_);
  map_.erase(h);
}

bool DirAttrCache::Get(Handle h, Attr* out) {
  if (max_age_ms_ == 0) return false;
  std::lock_guard<std::mutex> l(mu_);
  auto it = map_.find(h);
  if (it == map_.end()) return false;
  if (std::chrono::steady_clock::now() - it->second.second >
      std::chrono::milliseconds(max_age_ms_)) {
    map_.erase(it);
    return false;
  }
  *out = it->second.first;
  return true;
}

}  // namespace clf::client
