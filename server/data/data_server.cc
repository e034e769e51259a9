#include "server/data/data_server.h"

#include "common/transport/tcp_transport.h"
#include "server/data/rdma_listener.h"

namespace clf::server {

DataServer::DataServer(DataOps* ops, std::string address, std::string secret,
                       uint32_t frame_timeout_ms, ReadScheduleOptions reads)
    : ops_(ops),
      reads_(reads),
      listener_(std::make_unique<transport::TcpDataListener>(std::move(address), std::move(secret),
                                                             this, frame_timeout_ms)) {}

DataServer::DataServer(DataOps* ops, std::string address, transport::DataChannelAuth auth,
                       uint32_t frame_timeout_ms, ReadScheduleOptions reads)
    : ops_(ops),
      reads_(reads),
      listener_(std::make_unique<transport::TcpDataListener>(std::move(address), std::move(auth),
                                                             this, frame_timeout_ms)) {}

DataServer::~DataServer() { Stop(); }

Status DataServer::Start() { return listener_->Start(); }

Status DataServer::StartRdma(std::string rdma_address, std::string provider, std::string secret,
                             uint32_t frame_timeout_ms) {
  auto l = std::make_unique<RdmaDataListener>(std::move(rdma_address), std::move(provider),
                                              std::move(secret), this, frame_timeout_ms);
  CLF_RETURN_IF_ERROR(l->Start());
  rdma_ = std::move(l);
  return Status::Ok();
}

void DataServer::Stop() {
  if (rdma_) rdma_->Stop();
  listener_->Stop();
}

std::string DataServer::offers() const {
  if (rdma_) return "rdma(" + rdma_->provider() + ")";
  return std::string(TransportName(listener_->kind()));
}

Result<uint64_t> DataServer::CheckExtents(const std::vector<transport::Extent>& extents) {
  return DataOps::CheckExtents(extents);
}

Status DataServer::Write(Handle h, const std::vector<transport::Extent>& extents,
                         std::string_view payload, bool sync) {
  return ops_->Write(h, extents, payload, sync);
}

Status DataServer::Read(Handle h, const std::vector<transport::Extent>& extents,
                        std::string* out) {
  return ops_->Read(h, extents, out);
}

Status DataServer::Sync(Handle h) { return ops_->Sync(h); }

std::unique_ptr<transport::DataHandler::ReadTurn> DataServer::AwaitReadTurn(
    Handle h, const std::vector<transport::Extent>& extents, uint32_t sched_tag) {
  return reads_.Await(h, extents.empty() ? 0 : extents.front().offset, sched_tag);
}

}  // namespace clf::server
