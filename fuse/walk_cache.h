// WalkCache: the subdirectories this mount recently told the kernel about in
// directories whose names the kernel keeps for no time.
//
// Without -o default_permissions the kernel checks no search permission on a
// path walk through names it has cached, so in a directory that some user
// may not search (no o+x: tar creates every directory 0700 until it ends)
// the mount gives names an entry timeout of 0 and every walk through them
// comes back as a LOOKUP (fuse/ops_util.h, EntryTimeoutIn). This cache lets
// the mount answer those lookups itself, checking the caller's search
// permission each time, for as long as the kernel would otherwise have kept
// the name (the entry timeout): what a second client sees is what it would
// see through the kernel's own cache of names in a searchable directory.
//
// This mount's own unlink, rmdir and rename of a name forget it first.
//
// Thread safety: every method is thread safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace clf::fuse {

class WalkCache {
 public:
  using Clock = std::chrono::steady_clock;

  // ttl: how long a noted name is answered (the mount's entry timeout).
  // max_entries: beyond it, expired names are dropped, then all of them.
  explicit WalkCache(Clock::duration ttl, size_t max_entries = 1 << 16);

  // `child`, a directory, is `name` in `parent` as of now.
  void Note(uint64_t parent, const std::string& name, uint64_t child);
  // The directory noted as `name` in `parent` less than ttl ago.
  std::optional<uint64_t> Find(uint64_t parent, const std::string& name) const;
  void Forget(uint64_t parent, const std::string& name);

  size_t size() const;

 private:
  struct Walked {
    uint64_t child = 0;
    Clock::time_point noted;
  };
  static std::string Key(uint64_t parent, const std::string& name);
  void PruneLocked(Clock::time_point now);

  const Clock::duration ttl_;
  const size_t max_entries_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Walked> names_;
};

}  // namespace clf::fuse
