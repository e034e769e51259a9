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

Status DataOps::Write(Handle h, const std::vector<Extent>& extents,
                      std::string_view payload, bool sync) {
  CLF_ASSIGN_OR_RETURN(uint64_t total, CheckExtents(extents));
  if (total != payload.size()) return Invalid("payload size does not match the extents");
  return objects_->Write(h, extents, payload, sync);
}

Status DataOps::Read(Handle h, const std::vector<Extent>& extents, std::string* out) {
  CLF_RETURN_IF_ERROR(CheckExtents(extents).status());
  return objects_->Read(h, extents, out);
}

Result<std::shared_ptr<int>> DataOps::ObjectFd(Handle h, bool for_write) {
  return objects_->Descriptor(h, for_write);
}

bool DataOps::WantsAligned(const std::vector<Extent>& extents) const {
  return objects_->WantsDirect(extents);
}

Status DataOps::WroteSpliced(const std::shared_ptr<int>& fd, const std::vector<Extent>& extents,
                             bool sync) {
  return objects_->AfterWrite(fd, extents, sync);
}

Status DataOps::Sync(Handle h) {
  CLF_RETURN_IF_ERROR(objects_->Sync(h));
  if (meta_ != nullptr && ServerOf(h) == self_) return meta_->SyncWal();
  return Status::Ok();
}

Status DataOps::Write(const v1::WriteRequest& r) {
  if (r.extents_size() > static_cast<int>(kMaxExtents)) return Status(Code::kTooBig, "too many extents");
  return Write(r.handle(), FromProto(r.extents()), r.payload(), r.sync());
}

Result<std::string> DataOps::Read(const v1::ReadRequest& r) {
  if (r.extents_size() > static_cast<int>(kMaxExtents)) return Status(Code::kTooBig, "too many extents");
  std::string out;
  CLF_RETURN_IF_ERROR(Read(r.handle(), FromProto(r.extents()), &out));
  return out;
}

}  // namespace clf::server
