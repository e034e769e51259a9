#include "server/ops/data_ops.h"

#include "common/config.h"
#include "common/layout.h"

namespace clf::server {
namespace {

std::vector<Extent> FromProto(
    const google::protobuf::RepeatedPtrField<v1::Extent>& in) {
  std::vector<Extent> out;
  out.reserve(static_cast<size_t>(in.size()));
  for (const v1::Extent& e : in) out.push_back(Extent{e.offset(), e.length()});
  return out;
}

}  // namespace

Status DataOps::ObjectOf(Handle h, const v1::ObjectCopy& c, ObjectRef* out) {
  ObjectRef o(h, c.slot(), c.replicas() == 0 ? 1 : c.replicas());
  o.forwarded = c.forwarded();
  o.orderer = c.orderer();
  CLF_RETURN_IF_ERROR(CheckObjectRef(o));
  *out = o;
  return Status::Ok();
}

Result<uint64_t> DataOps::CheckExtents(const std::vector<Extent>& extents) {
  if (extents.size() > kMaxExtents) return Status(Code::kTooBig, "too many extents");
  uint64_t total = 0;
  for (const Extent& e : extents) {
    if (e.offset > kMaxFileSize || e.length > kMaxFileSize - e.offset) {
      return Status(Code::kFileTooBig, "extent past the maximum file size");
    }
    total += e.length;
    if (total > kMaxIoBytes) return Status(Code::kTooBig, "request larger than 64 MiB");
  }
  return total;
}

Result<Replication*> DataOps::Replicating() const {
  if (copies_ == nullptr || replication_ == nullptr) {
    return Status(Code::kNotSupported, "this server does not serve replicated files");
  }
  return replication_;
}

Result<ObjectStore*> DataOps::CopyFor(const ObjectRef& obj, bool read) {
  if (!obj.replicated()) return objects_;
  CLF_RETURN_IF_ERROR(Replicating().status());
  if (read || !obj.forwarded) {
    CLF_RETURN_IF_ERROR(replication_->CheckCurrent(obj));
    if (read && obj.slot > 0) replication_->CountCopyRead();
  } else {
    CLF_RETURN_IF_ERROR(replication_->CheckForwarded(obj));
  }
  return copies_->For(obj.slot);
}

Status DataOps::Write(const ObjectRef& obj, const std::vector<Extent>& extents,
                      std::string_view payload, bool sync) {
  CLF_ASSIGN_OR_RETURN(uint64_t total, CheckExtents(extents));
  if (total != payload.size()) return Invalid("payload size does not match the extents");
  if (obj.replicated() && !obj.forwarded) {
    CLF_ASSIGN_OR_RETURN(Replication * r, Replicating());
    return r->OrderedWrite(obj, extents, payload, sync);
  }
  CLF_ASSIGN_OR_RETURN(ObjectStore * store, CopyFor(obj, false));
  std::unique_ptr<WriteIntents::Writing> writing;
  if (obj.replicated()) {
    CLF_ASSIGN_OR_RETURN(writing, replication_->BeginWrite(obj.handle, obj.slot));
  }
  return store->Write(obj.handle, extents, payload, sync);
}

Status DataOps::Read(const ObjectRef& obj, const std::vector<Extent>& extents, std::string* out) {
  CLF_RETURN_IF_ERROR(CheckExtents(extents).status());
  CLF_ASSIGN_OR_RETURN(ObjectStore * store, CopyFor(obj, true));
  return store->Read(obj.handle, extents, out);
}

Result<std::shared_ptr<int>> DataOps::ObjectFd(const ObjectRef& obj, bool for_write) {
  if (obj.replicated() && for_write && !obj.forwarded) {
    return Status(Code::kNotSupported, "an ordered write is forwarded from memory");
  }
  CLF_ASSIGN_OR_RETURN(ObjectStore * store, CopyFor(obj, !for_write));
  CLF_ASSIGN_OR_RETURN(std::shared_ptr<int> fd, store->Descriptor(obj.handle, for_write));
  if (!obj.replicated() || !for_write || fd == nullptr) return fd;
  // A forwarded write spliced into the copy: its write record is held as
  // long as the caller holds the descriptor (until the bytes are written).
  struct Held {
    std::shared_ptr<int> fd;
    std::unique_ptr<WriteIntents::Writing> writing;
  };
  auto held = std::make_shared<Held>();
  CLF_ASSIGN_OR_RETURN(held->writing, replication_->BeginWrite(obj.handle, obj.slot));
  held->fd = std::move(fd);
  int* raw = held->fd.get();
  return std::shared_ptr<int>(std::move(held), raw);
}

bool DataOps::WantsAligned(const std::vector<Extent>& extents) const {
  return objects_->WantsDirect(extents);
}

Status DataOps::WroteSpliced(const std::shared_ptr<int>& fd, const std::vector<Extent>& extents,
                             bool sync) {
  return objects_->AfterWrite(fd, extents, sync);
}

Status DataOps::Sync(const ObjectRef& obj) {
  if (obj.replicated() && !obj.forwarded) {
    // A client's sync of a replicated file's units: every copy, by their orderer.
    CLF_ASSIGN_OR_RETURN(Replication * r, Replicating());
    CLF_RETURN_IF_ERROR(r->OrderedSync(obj));
  } else {
    // A forwarded sync reaches any copy, current or stale: it makes what
    // this copy has durable.
    ObjectStore* store = objects_;
    if (obj.replicated()) store = copies_ != nullptr ? copies_->IfOpen(obj.slot) : nullptr;
    if (store != nullptr) CLF_RETURN_IF_ERROR(store->Sync(obj.handle));
  }
  if (meta_ != nullptr && ServerOf(obj.handle) == self_) return meta_->SyncWal();
  return Status::Ok();
}

Status DataOps::Truncate(const ObjectRef& obj, uint64_t size) {
  if (!obj.replicated() || !obj.forwarded) {
    return Invalid("data channel truncate: only a replicated file's acting primary cuts a copy");
  }
  if (size > kMaxFileSize) return Status(Code::kFileTooBig, "truncate past the maximum file size");
  CLF_ASSIGN_OR_RETURN(ObjectStore * store, CopyFor(obj, false));
  CLF_ASSIGN_OR_RETURN(auto writing, replication_->BeginWrite(obj.handle, obj.slot));
  return store->Truncate(obj.handle, size);
}

Status DataOps::Write(const v1::WriteRequest& r) {
  if (r.extents_size() > static_cast<int>(kMaxExtents)) return Status(Code::kTooBig, "too many extents");
  ObjectRef obj(r.handle());
  CLF_RETURN_IF_ERROR(ObjectOf(r.handle(), r.copy(), &obj));
  return Write(obj, FromProto(r.extents()), r.payload(), r.sync());
}

Result<std::string> DataOps::Read(const v1::ReadRequest& r) {
  if (r.extents_size() > static_cast<int>(kMaxExtents)) return Status(Code::kTooBig, "too many extents");
  ObjectRef obj(r.handle());
  CLF_RETURN_IF_ERROR(ObjectOf(r.handle(), r.copy(), &obj));
  std::string out;
  CLF_RETURN_IF_ERROR(Read(obj, FromProto(r.extents()), &out));
  return out;
}

}  // namespace clf::server
