#include "server/data/copy_stores.h"

#include <filesystem>

#include "common/log.h"

namespace clf::server {

CopyStores::CopyStores(ObjectStore* primary, Settings settings)
    : primary_(primary), settings_(settings) {
  for (uint32_t slot = 1; slot < kMaxReplicas; ++slot) {
    std::error_code ec;
    if (!std::filesystem::is_directory(DirOf(slot), ec)) continue;
    if (Result<ObjectStore*> s = For(slot); !s.ok()) {
      CLF_LOG_WARN("replica store {}: {}", DirOf(slot), s.status().ToString());
    }
  }
}

std::string CopyStores::DirOf(uint32_t slot) const {
  return slot == 0 ? primary_->dir() : primary_->dir() + "-r" + std::to_string(slot);
}

Result<ObjectStore*> CopyStores::For(uint32_t slot) {
  if (slot == 0) return primary_;
  if (slot >= kMaxReplicas) return Invalid("copy slot " + std::to_string(slot) + " out of range");
  std::lock_guard<std::mutex> l(mu_);
  if (replicas_[slot] == nullptr) {
    CLF_ASSIGN_OR_RETURN(std::unique_ptr<ObjectStore> s,
                         ObjectStore::Open(DirOf(slot), settings_.early_writeback_bytes,
                                           settings_.read_ahead_bytes));
    s->set_direct_write_bytes(settings_.direct_write_bytes);
    replicas_[slot] = std::move(s);
  }
  return replicas_[slot].get();
}

ObjectStore* CopyStores::IfOpen(uint32_t slot) {
  if (slot == 0) return primary_;
  if (slot >= kMaxReplicas) return nullptr;
  std::lock_guard<std::mutex> l(mu_);
  return replicas_[slot].get();
}

}  // namespace clf::server
