// DataServer: clfd's end of the bulk data path. Owns the data channel's
// listeners (the TCP data channel on the server's data address and, when
// started, the RDMA listener on its RDMA address) and answers their requests
// with DataOps, the same checks and object I/O the gRPC Data service uses.
// Each listener reaches this through its own forwarding handler, which counts
// the payload it moves in a DataBytes (set_bytes) under its transport's name.
// Thread safety: set_bytes, Start and Stop from one thread; requests arrive on
// the listener's connection threads.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/config.h"
#include "common/transport/tcp_transport.h"
#include "common/transport/transport.h"
#include "server/data/data_bytes.h"
#include "server/data/read_gate.h"
#include "server/ops/data_ops.h"

namespace clf::server {

class RdmaDataListener;

class DataServer final : public transport::DataHandler {
 public:
  // Listens on `address` (host:port); frames must complete within frame_timeout_ms.
  DataServer(DataOps* ops, std::string address, std::string secret, uint32_t frame_timeout_ms,
             ReadScheduleOptions reads = {});
  // The same, authenticating connections as `auth` says (the secret or mutual
  // TLS); tagged reads are served in the order of `reads` (ReadGate).
  DataServer(DataOps* ops, std::string address, transport::DataChannelAuth auth,
             uint32_t frame_timeout_ms, ReadScheduleOptions reads = {});
  ~DataServer() override;

  // Payload counts of both listeners go to `bytes` (null: not counted). Call
  // before Start; `bytes` must outlive this object.
  void set_bytes(DataBytes* bytes) { bytes_ = bytes; }
  // Runs at every write and read either listener serves (the purge throttle's
  // signal, MetaOps::NoteForeground). Call before Start.
  void set_on_request(std::function<void()> f) { on_request_ = std::move(f); }
  Status Start();
  // Also serves the RDMA path (libfabric `provider`: auto, tcp or verbs) on rdma_address.
  Status StartRdma(std::string rdma_address, std::string provider, std::string secret,
                   uint32_t frame_timeout_ms);
  void Stop();
  // What the server offers for bulk data: "rdma(<provider>)" when the RDMA
  // listener runs (the TCP channel runs too), else "tcp".
  std::string offers() const;
  TransportKind kind() const { return listener_->kind(); }
  std::string address() const { return listener_->address(); }

  Result<uint64_t> CheckExtents(const std::vector<Extent>& extents) override;
  Status Write(const ObjectRef& obj, const std::vector<Extent>& extents, std::string_view payload,
               bool sync) override;
  Status Read(const ObjectRef& obj, const std::vector<Extent>& extents, std::string* out) override;
  Status Sync(const ObjectRef& obj) override;
  std::unique_ptr<ReadTurn> AwaitReadTurn(const ObjectRef& obj, const std::vector<Extent>& extents,
                                          uint32_t sched_tag) override;
  const ReadGate& read_gate() const { return reads_; }

 private:
  class Counted;  // a listener's handler: forwards to this, counts payload bytes

  DataOps* ops_;
  ReadGate reads_;
  DataBytes* bytes_ = nullptr;
  std::function<void()> on_request_;
  std::unique_ptr<Counted> tcp_handler_, rdma_handler_;  // before the listeners that use them
  std::unique_ptr<transport::DataListener> listener_;
  std::unique_ptr<RdmaDataListener> rdma_;  // null: no RDMA listener
};

}  // namespace clf::server
