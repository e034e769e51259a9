// DataOps: reads, writes and syncs of this server's data objects, with the
// checks every data request gets whatever carried it (gRPC Data service or the
// TCP data channel): extent count, ranges inside the maximum file size, total
// bytes within kMaxIoBytes, payload size matching the extents. A write creates
// the object if it does not exist yet (objects are made by the first write); a
// read or sync of a missing object sees a hole / has nothing to sync.
// Thread safety: all methods are thread safe (the object store is).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "clf/v1/data.pb.h"
#include "common/status.h"
#include "common/transport/transport.h"
#include "server/data/copy_stores.h"
#include "server/data/object_store.h"
#include "server/ops/replication.h"
#include "server/store/meta_store.h"

namespace clf::server {

class DataOps {
 public:
  // `meta` (optional) is this server's metadata store: Sync of a file whose
  // metadata lives here (ServerOf(h) == self) also syncs its WAL, so fsync
  // makes the file's size and times durable too.
  explicit DataOps(ObjectStore* objects, RocksMetaStore* meta = nullptr, ServerId self = 0)
      : objects_(objects), meta_(meta), self_(self) {}

  // Replicated files (ObjectRef::replicated): the stores of this server's
  // copies and the replication logic. Unset: such requests are refused
  // (kNotSupported). Set before serving; both outlive this.
  void set_replication(CopyStores* copies, Replication* replication) {
    copies_ = copies;
    replication_ = replication;
  }

  // The shared checks; returns the extents' total bytes.
  static Result<uint64_t> CheckExtents(const std::vector<Extent>& extents);

  Status Write(const ObjectRef& obj, const std::vector<Extent>& extents, std::string_view payload,
               bool sync);
  // Fills `out` (resized to the extents' total); holes read as zeros.
  Status Read(const ObjectRef& obj, const std::vector<Extent>& extents, std::string* out);
  Status Sync(const ObjectRef& obj);
  // A resync's cut of a replicated file's copy (forwarded by its acting
  // primary); anything else is refused (truncates go through M).
  Status Truncate(const ObjectRef& obj, uint64_t size);
  // The zero-copy path of the TCP data channel (transport::DataHandler):
  // the object's descriptor (null: none, reads as zeros), and what follows a
  // spliced write of extents CheckExtents accepted. A write a replicated
  // file's copy orders is not spliced (kNotSupported: its bytes are
  // forwarded from memory).
  Result<std::shared_ptr<int>> ObjectFd(const ObjectRef& obj, bool for_write);
  bool WantsAligned(const std::vector<Extent>& extents) const;
  Status WroteSpliced(const std::shared_ptr<int>& fd, const std::vector<Extent>& extents,
                      bool sync);

  // The object a gRPC Data request's handle and copy name (the data
  // channels' frame::GetObject); kInvalid for slots out of range.
  static Status ObjectOf(Handle h, const v1::ObjectCopy& c, ObjectRef* out);
  // The gRPC Data service's requests.
  Status Write(const v1::WriteRequest& r);
  Result<std::string> Read(const v1::ReadRequest& r);

 private:
  // The store of obj's copy, after the replication checks of a request of
  // this kind (a replicated object's read, forwarded write or sync).
  Result<ObjectStore*> CopyFor(const ObjectRef& obj, bool read);
  // The replication logic, or kNotSupported when this server has none.
  Result<Replication*> Replicating() const;

  ObjectStore* objects_;
  CopyStores* copies_ = nullptr;
  Replication* replication_ = nullptr;
  RocksMetaStore* meta_;
  ServerId self_;
};

}  // namespace clf::server
