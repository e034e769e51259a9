#include "common/transport/grpc_transport.h"

#include <cstring>

#include "common/status_grpc.h"

namespace clf::transport {
namespace {

template <typename Request>
void SetCopy(const ObjectRef& o, Request* r) {
  if (!o.replicated()) return;
  v1::ObjectCopy* c = r->mutable_copy();
  c->set_slot(o.slot);
  c->set_replicas(o.replicas);
  c->set_forwarded(o.forwarded);
  c->set_orderer(o.orderer);
}

}  // namespace

GrpcTransport::GrpcTransport(std::shared_ptr<grpc::Channel> channel, std::string secret,
                             uint32_t timeout_ms)
    : stub_(v1::Data::NewStub(channel)), secret_(std::move(secret)), timeout_ms_(timeout_ms) {}

void GrpcTransport::Prepare(grpc::ClientContext* ctx) const {
  if (!secret_.empty()) ctx->AddMetadata(kSecretHeader, secret_);  // empty with TLS
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms_));
}

Status GrpcTransport::Write(const ObjectRef& obj, const std::vector<Extent>& extents,
                            const std::vector<iovec>& payload, bool sync) {
  v1::WriteRequest r;
  r.set_handle(obj.handle);
  SetCopy(obj, &r);
  r.set_sync(sync);
  for (const Extent& e : extents) {
    v1::Extent* x = r.add_extents();
    x->set_offset(e.offset);
    x->set_length(e.length);
  }
  std::string* p = r.mutable_payload();
  p->reserve(TotalBytes(payload));
  for (const iovec& v : payload) p->append(static_cast<const char*>(v.iov_base), v.iov_len);
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::WriteReply rep;
  return FromGrpc(stub_->Write(&ctx, r, &rep));
}

Status GrpcTransport::Read(const ObjectRef& obj, const std::vector<Extent>& extents,
                           const std::vector<iovec>& dest) {
  v1::ReadRequest r;
  r.set_handle(obj.handle);
  SetCopy(obj, &r);
  for (const Extent& e : extents) {
    v1::Extent* x = r.add_extents();
    x->set_offset(e.offset);
    x->set_length(e.length);
  }
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::ReadReply rep;
  CLF_RETURN_IF_ERROR(FromGrpc(stub_->Read(&ctx, r, &rep)));
  if (rep.payload().size() != TotalBytes(dest)) return IoError("short read reply from a data server");
  size_t pos = 0;
  for (const iovec& v : dest) {
    std::memcpy(v.iov_base, rep.payload().data() + pos, v.iov_len);
    pos += v.iov_len;
  }
  return Status::Ok();
}

Status GrpcTransport::Sync(const ObjectRef& obj) {
  v1::SyncRequest r;
  r.set_handle(obj.handle);
  SetCopy(obj, &r);
  grpc::ClientContext ctx;
  Prepare(&ctx);
  v1::SyncReply rep;
  return FromGrpc(stub_->Sync(&ctx, r, &rep));
}

}  // namespace clf::transport
