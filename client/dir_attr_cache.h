// Directory attributes this client saw, answered again for at most a set time
// (ClientOptions::dir_attr_cache_ms; 0 = off, every call a no-op): bounded
// staleness, like a kernel attribute timeout. Internal to client/.
// Thread safety: thread safe (one mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "clf/client.h"
#include "clf/v1/meta.pb.h"

namespace clf::client {

class DirAttrCache {
 public:
  explicit DirAttrCache(uint32_t max_age_ms) : max_age_ms_(max_age_ms) {}

  // Remembers `a` if it is a directory's.
  void Put(const v1::Attr& a);
  void Forget(Handle h);
  // True with *out set when h's attributes are at most max_age_ms old.
  bool Get(Handle h, Attr* out);

 private:
  static constexpr size_t kMaxEntries = 100000;  // then it starts over
  const uint32_t max_age_ms_;
  std::mutex mu_;  // guards map_
  std::unordered_map<Handle, std::pair<Attr, std::chrono::steady_clock::time_point>> map_;
};

}  // namespace clf::client
