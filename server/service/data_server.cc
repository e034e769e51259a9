#include "server/service/data_server.h"

#include "common/transport/tcp_transport.h"
#include "server/data/rdma_listener.h"

namespace clf::server {

// Counts what the listener moves: a write's payload as received (whatever the
// write's outcome: it crossed the wire), a read's payload once read (the
// listener sends it on success).
class DataServer::Counted final : public transport::DataHandler {
 public:
  Counted(DataServer* s, DataBytes::Path path) : s_(s), path_(path) {}
  Result<uint64_t> CheckExtents(const std::vector<Extent>& extents) override {
    return s_->CheckExtents(extents);
  }
  Status Write(const ObjectRef& obj, const std::vector<Extent>& extents, std::string_view payload,
               bool sync) override {
    if (s_->bytes_ != nullptr) s_->bytes_->AddIn(path_, payload.size());
    if (s_->on_request_) s_->on_request_();
    return s_->Write(obj, extents, payload, sync);
  }
  Status Read(const ObjectRef& obj, const std::vector<Extent>& extents, std::string* out) override {
    if (s_->on_request_) s_->on_request_();
    Status r = s_->Read(obj, extents, out);
    if (r.ok() && s_->bytes_ != nullptr) s_->bytes_->AddOut(path_, out->size());
    return r;
  }
  Status Sync(const ObjectRef& obj) override { return s_->Sync(obj); }
  Status Truncate(const ObjectRef& obj, uint64_t size) override {
    return s_->ops_->Truncate(obj, size);
  }
  Result<std::shared_ptr<int>> ObjectFd(const ObjectRef& obj, bool for_write) override {
    if (s_->on_request_) s_->on_request_();
    return s_->ops_->ObjectFd(obj, for_write);
  }
  Status WroteSpliced(const std::shared_ptr<int>& fd, const std::vector<Extent>& extents, uint64_t bytes,
                      bool sync) override {
    if (s_->bytes_ != nullptr) {
      s_->bytes_->AddIn(path_, bytes);
      s_->bytes_->AddZeroCopyIn(bytes);
    }
    return s_->ops_->WroteSpliced(fd, extents, sync);
  }
  bool WantsAligned(const std::vector<Extent>& extents) override {
    return s_->ops_->WantsAligned(extents);
  }
  std::unique_ptr<ReadTurn> AwaitReadTurn(const ObjectRef& obj, const std::vector<Extent>& extents,
                                          uint32_t sched_tag) override {
    return s_->AwaitReadTurn(obj, extents, sched_tag);
  }

 private:
  DataServer* s_;
  DataBytes::Path path_;
};

DataServer::DataServer(DataOps* ops, std::string address, std::string secret,
                       uint32_t frame_timeout_ms, ReadScheduleOptions reads)
    : DataServer(ops, std::move(address),
                 transport::DataChannelAuth{std::move(secret), nullptr, true, {}}, frame_timeout_ms,
                 reads) {}

DataServer::DataServer(DataOps* ops, std::string address, transport::DataChannelAuth auth,
                       uint32_t frame_timeout_ms, ReadScheduleOptions reads)
    : ops_(ops),
      reads_(reads),
      tcp_handler_(std::make_unique<Counted>(this, DataBytes::kTcp)),
      rdma_handler_(std::make_unique<Counted>(this, DataBytes::kRdma)),
      listener_(std::make_unique<transport::TcpDataListener>(
          std::move(address), std::move(auth), tcp_handler_.get(), frame_timeout_ms)) {}

DataServer::~DataServer() { Stop(); }

Status DataServer::Start() { return listener_->Start(); }

Status DataServer::StartRdma(std::string rdma_address, std::string provider, std::string secret,
                             uint32_t frame_timeout_ms) {
  auto l =
      std::make_unique<RdmaDataListener>(std::move(rdma_address), std::move(provider),
                                         std::move(secret), rdma_handler_.get(), frame_timeout_ms);
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

Result<uint64_t> DataServer::CheckExtents(const std::vector<Extent>& extents) {
  return DataOps::CheckExtents(extents);
}

Status DataServer::Write(const ObjectRef& obj, const std::vector<Extent>& extents,
                         std::string_view payload, bool sync) {
  return ops_->Write(obj, extents, payload, sync);
}

Status DataServer::Read(const ObjectRef& obj, const std::vector<Extent>& extents,
                        std::string* out) {
  return ops_->Read(obj, extents, out);
}

Status DataServer::Sync(const ObjectRef& obj) { return ops_->Sync(obj); }

std::unique_ptr<transport::DataHandler::ReadTurn> DataServer::AwaitReadTurn(
    const ObjectRef& obj, const std::vector<Extent>& extents, uint32_t sched_tag) {
  return reads_.Await(obj.handle, extents.empty() ? 0 : extents.front().offset, sched_tag);
}

}  // namespace clf::server
