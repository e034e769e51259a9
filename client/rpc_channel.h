// libclf's gRPC plumbing: one metadata channel per server (Meta and Admin
// stubs on it), the session and credentials every call carries, the per-call
// deadline, and the count of calls in flight. Internal to client/.
// Thread safety: thread safe. Callbacks run on gRPC's completion threads.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "clf/v1/admin.grpc.pb.h"
#include "clf/v1/meta.grpc.pb.h"
#include "common/config.h"
#include "common/credentials.h"
#include "common/status.h"
#include "common/status_grpc.h"
#include "common/tsan.h"

namespace clf::client {

// The server handle h lives on, of a cluster of `servers`; kStale when it names none.
Status RouteHandle(Handle h, uint32_t servers, ServerId* s);

// Calls in flight: the owner of a channel waits until gRPC released them all
// (destroying a channel while the callback API still finishes a call on it
// has aborted inside gRPC: "ref_counted.h: prior > 0").
class CallCount {
 public:
  void Add();
  void Done();
  // False if calls were still live after `timeout`.
  bool WaitIdle(std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t n_ = 0;
};

template <typename Req, typename Resp>
struct CallState {
  // Counts the call in `live` until gRPC has dropped it entirely (the
  // channel's owner waits for that, so no call outlives its channel).
  explicit CallState(std::shared_ptr<CallCount> live) : live_(std::move(live)) { live_->Add(); }
  ~CallState() { live_->Done(); }
  grpc::ClientContext ctx;
  Req req;
  Resp resp;

 private:
  std::shared_ptr<CallCount> live_;
};

class RpcChannel {
 public:
  // Creates the channels (lazily connected). timeout_ms: every call's deadline
  // unless a call names its own.
  RpcChannel(const ClusterConfig& cluster, const Credentials& cred, uint32_t timeout_ms);

  const ClusterConfig& cluster() const { return cluster_; }
  const Credentials& credentials() const { return cred_; }
  uint32_t timeout_ms() const { return timeout_ms_; }
  uint64_t session() const { return session_; }
  // The metadata channels, by server (for BaselinePath's stubs).
  const std::vector<std::shared_ptr<grpc::Channel>>& channels() const { return channels_; }
  v1::Meta::Stub* meta(ServerId s) const { return meta_[s].get(); }
  v1::Admin::Stub* admin(ServerId s) const { return admin_[s].get(); }

  // Credentials, the session header and the deadline (timeout_ms, or the
  // channel's when 0) for one call.
  void Prepare(grpc::ClientContext* ctx, uint32_t timeout_ms = 0) const;

  // The server a handle lives on; kStale when it names none of this cluster.
  Status Route(Handle h, ServerId* s) const { return RouteHandle(h, cluster_.size(), s); }

  // Waits until every call started through Unary finished; false after
  // `timeout` with calls still live.
  bool WaitIdle(std::chrono::milliseconds timeout) { return live_->WaitIdle(timeout); }

  // Starts one unary call: `invoke` issues it on a stub's async() interface;
  // `done` runs once on a gRPC thread with the status and the reply.
  template <typename Req, typename Resp, typename Invoke>
  void Unary(Invoke invoke, Req req, std::function<void(Status, Resp&)> done,
             uint32_t timeout_ms = 0) {
    auto c = std::make_shared<CallState<Req, Resp>>(live_);
    c->req = std::move(req);
    Prepare(&c->ctx, timeout_ms);
    // Every unary call of libclf's clients starts and completes here: the
    // hand-off to gRPC's completion thread (common/tsan.h).
    invoke(&c->ctx, &c->req, &c->resp,
           tsan::Handoff(c.get(), [c, done = std::move(done)](grpc::Status s) {
             done(FromGrpc(s), c->resp);
           }));
  }

 private:
  const ClusterConfig cluster_;
  const Credentials cred_;
  const uint32_t timeout_ms_;
  uint64_t session_ = 0;
  std::string session_str_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Meta::Stub>> meta_;
  std::vector<std::unique_ptr<v1::Admin::Stub>> admin_;
  std::shared_ptr<CallCount> live_ = std::make_shared<CallCount>();
};

// One Meta call on server `server`'s stub through `rpc`'s Unary.
#define CLF_META_CALL(rpc, server, Method, ReqT, RespT, req, done)               \
  (rpc).Unary<ReqT, RespT>(                                                      \
      [stub = (rpc).meta(server)](grpc::ClientContext* ctx, ReqT* rq, RespT* rs, \
                                  std::function<void(grpc::Status)> cb) {        \
        stub->async()->Method(ctx, rq, rs, std::move(cb));                       \
      },                                                                         \
      std::move(req), std::function<void(Status, RespT&)>(done))

}  // namespace clf::client
