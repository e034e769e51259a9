#include "server/data/data_server.h"

#include "common/transport/tcp_transport.h"

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
void DataServer::Stop() { listener_->Stop(); }

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
