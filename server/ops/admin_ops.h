// AdminOps: what the Admin service reports and does, over MetaOps, the
// stores and the lock service (no gRPC types): a server's storage,
// metadata, garbage and lock state for `clf status`, the objects it holds
// for `clf fsck`, and the removal of an object fsck asks for.
// Thread safety: every method is thread safe (what it reads is).
#pragma once

#include "clf/v1/admin.pb.h"
#include "common/handle.h"
#include "common/status.h"
#include "server/data/object_store.h"
#include "server/ops/lock_ops.h"
#include "server/ops/meta_ops.h"
#include "server/store/meta_store.h"

namespace clf::server {

class AdminOps {
 public:
  // All must outlive this object; `locks` may be null (no lock service).
  AdminOps(MetaOps* ops, RocksMetaStore* store, ObjectStore* objects, LockOps* locks)
      : ops_(ops), store_(store), objects_(objects), locks_(locks) {}

  // The storage, metadata, garbage, lock and rename parts of a status reply
  // (the caller adds who it is: id, address, uptime, transport).
  void FillStatus(v1::StatusReply* out) const;
  // Every data object, inode and orphan record held here.
  void ListObjects(v1::ListObjectsReply* out) const;
  // Removes this server's data object of `h` (fsck's repair of an object
  // without a file); idempotent.
  Status RemoveObject(Handle h);

 private:
  MetaOps* ops_;
  RocksMetaStore* store_;
  ObjectStore* objects_;
  LockOps* locks_;
};

}  // namespace clf::server
