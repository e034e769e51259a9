#include "client/rpc_channel.h"

#include <random>

namespace clf::client {

void CallCount::Add() {
  std::lock_guard<std::mutex> l(mu_);
  ++n_;
}

void CallCount::Done() {
  std::lock_guard<std::mutex> l(mu_);
  if (--n_ == 0) cv_.notify_all();
}

bool CallCount::WaitIdle(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, timeout, [this] { return n_ == 0; });
}

RpcChannel::RpcChannel(const ClusterConfig& cluster, const Credentials& cred, uint32_t timeout_ms)
    : cluster_(cluster), cred_(cred), timeout_ms_(timeout_ms) {
  {
    std::random_device rd;
    while (session_ == 0) session_ = (uint64_t{rd()} << 32) ^ rd();
    session_str_ = std::to_string(session_);
  }
  HoldCallbackQueue();
  grpc::ChannelArguments args = ClfChannelArgs();
  std::shared_ptr<grpc::ChannelCredentials> creds = ChannelCredentialsFor(cred_);
  for (const ServerConfig& s : cluster_.servers) {
    auto ch = grpc::CreateCustomChannel(s.address, creds, args);
    channels_.push_back(ch);
    meta_.push_back(v1::Meta::NewStub(ch));
    admin_.push_back(v1::Admin::NewStub(ch));
  }
}

void RpcChannel::Prepare(grpc::ClientContext* ctx, uint32_t timeout_ms) const {
  AddCallCredentials(ctx, cred_);
  ctx->AddMetadata(kSessionHeader, session_str_);
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(timeout_ms ? timeout_ms : timeout_ms_));
}

Status RouteHandle(Handle h, uint32_t servers, ServerId* s) {
  *s = ServerOf(h);
  if (h == 0 || *s >= servers)
    return Status(Code::kStale, "handle names no server of this cluster");
  return Status::Ok();
}

}  // namespace clf::client
