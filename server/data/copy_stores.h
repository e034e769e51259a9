// CopyStores: the object stores of the copies this server holds. Slot 0 (a
// file's own units on this server) is the primary store, `objects/`; a
// replicated file's copy in slot i (the units of the server i before this
// one, common/layout.h ReplicaServer) lives in `objects-r<i>/`, opened on
// first use (or at start when it exists), with the primary store's settings.
// Thread safety: thread safe; the stores live as long as this object.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "common/object_ref.h"
#include "common/status.h"
#include "server/data/object_store.h"

namespace clf::server {

class CopyStores {
 public:
  struct Settings {
    uint64_t early_writeback_bytes = ObjectStore::kEarlyWritebackBytes;
    uint64_t read_ahead_bytes = ObjectStore::kReadAheadBytes;
    uint64_t direct_write_bytes = 0;
  };
  // `primary` (slot 0) outlives this; the replica stores found on disk are opened.
  CopyStores(ObjectStore* primary, Settings settings);

  // The store of `slot` (< kMaxReplicas), opened (and made) on first use.
  Result<ObjectStore*> For(uint32_t slot);
  // The store of `slot` if it exists (on disk or opened), else null.
  ObjectStore* IfOpen(uint32_t slot);
  ObjectStore* primary() const { return primary_; }
  // The folder of slot i's store.
  std::string DirOf(uint32_t slot) const;

 private:
  ObjectStore* const primary_;
  const Settings settings_;
  std::mutex mu_;  // guards replicas_ while opening
  std::array<std::unique_ptr<ObjectStore>, kMaxReplicas> replicas_;  // [0] unused
};

}  // namespace clf::server
