// FsckOps: what `clf fsck` reads from and changes on one clfd. No gRPC types.
//
// Scan pages through this server's directory entries, attribute records
// (inodes), orphan and garbage records and data objects, a bounded page per
// call (the caller keeps the cursor). Repair applies one small change, and
// only if the state it was decided on still holds (the entry still names the
// handle, nlink is still the expected value, ...): fsck decides from a scan
// of every server and a concurrent change must not be undone by it.
//
// Thread safety: thread safe; takes MetaOps' directory and inode locks in its
// order (directory before inode) around each read-modify-write, so a repair
// and a namespace operation of this server never interleave. Blocks on
// RocksDB and local folders: run on an executor.
#pragma once

#include "clf/v1/admin.pb.h"
#include "common/status.h"
#include "server/data/object_store.h"
#include "server/ops/meta_ops.h"
#include "server/store/meta_store.h"

namespace clf::server {

class FsckOps {
 public:
  FsckOps(MetaOps* meta, RocksMetaStore* store, ObjectStore* objects)
      : meta_(meta), store_(store), objects_(objects) {}

  // One page of r.kind() after r.after(), at most r.max() items (validated).
  Result<v1::FsckScanReply> Scan(const v1::FsckScanRequest& r) const;
  // kStale when the state the repair was decided on changed meanwhile.
  // SETTLE_RENAME settles a pending rename as the background settler does
  // (MetaOps::SettleRename: kBusy while its Rename call runs, kUnavailable
  // while its destination does not answer).
  Status Repair(const v1::FsckRepairRequest& r);

 private:
  Status RemoveEntry(const v1::FsckRepairRequest& r);
  Status AddEntry(const v1::FsckRepairRequest& r);
  Status SetNlink(const v1::FsckRepairRequest& r);
  Status DropOrphan(const v1::FsckRepairRequest& r);
  Status ClearBlocks(const v1::FsckRepairRequest& r);

  MetaOps* meta_;
  RocksMetaStore* store_;
  ObjectStore* objects_;
};

}  // namespace clf::server
