#include "server/ops/admin_ops.h"

#include <sys/statvfs.h>

namespace clf::server {

void AdminOps::FillStatus(v1::StatusReply* out) const {
  out->set_objects(objects_->Count());
  out->set_bytes_used(objects_->BytesUsed());
  struct statvfs sv;
  if (::statvfs(objects_->dir().c_str(), &sv) == 0) {
    out->set_bytes_free(static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize);
    out->set_bytes_total(static_cast<uint64_t>(sv.f_blocks) * sv.f_frsize);
    out->set_files_free(sv.f_favail);
  }
  out->set_rocksdb_bytes(store_->ApproximateBytes());
  out->set_inodes(ops_->inode_count());
  out->set_garbage(store_->Garbage().size());
  if (locks_ != nullptr) {
    LockOps::Counts lc = locks_->counts();
    out->set_lock_sessions(lc.sessions);
    out->set_locks_granted(lc.granted);
    out->set_locks_waiting(lc.waiting);
  }
  out->set_rename_intents(ops_->rename_intent_count());
  out->set_rename_outcomes(ops_->rename_outcome_count());
}

void AdminOps::ListObjects(v1::ListObjectsReply* out) const {
  for (Handle h : objects_->List()) out->add_data_objects(h);
  for (Handle h : store_->AllAttrHandles()) out->add_meta_objects(h);
  for (Handle h : store_->Orphans()) out->add_orphans(h);
}

Status AdminOps::RemoveObject(Handle h) { return objects_->Remove(h); }

}  // namespace clf::server
