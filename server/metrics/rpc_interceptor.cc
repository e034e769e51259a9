#include "server/metrics/rpc_interceptor.h"

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>

#include <chrono>
#include <string>

namespace clf::server::metrics {
namespace {

using grpc::experimental::InterceptionHookPoints;

const char* CodeName(grpc::StatusCode c) {
  switch (c) {
    case grpc::OK: return "OK";
    case grpc::CANCELLED: return "CANCELLED";
    case grpc::UNKNOWN: return "UNKNOWN";
    case grpc::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND: return "NOT_FOUND";
    case grpc::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::ABORTED: return "ABORTED";
    case grpc::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::INTERNAL: return "INTERNAL";
    case grpc::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::DATA_LOSS: return "DATA_LOSS";
    case grpc::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "OTHER";
  }
}

class RpcInterceptor final : public grpc::experimental::Interceptor {
 public:
  RpcInterceptor(grpc::experimental::ServerRpcInfo* info, Registry* registry)
      : registry_(registry),
        method_(info->method() != nullptr ? info->method() : "unknown"),
        // Only our own services' messages are protobuf messages; others (the
        // health service) may carry raw byte buffers.
        protobuf_(method_.rfind("/clf.v1.", 0) == 0),
        start_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    if (protobuf_ && m->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (const void* msg = m->GetRecvMessage()) {
        in_ += static_cast<const google::protobuf::MessageLite*>(msg)->ByteSizeLong();
      }
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      if (grpc::ByteBuffer* buf = m->GetSerializedSendMessage()) out_ += buf->Length();
    }
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      registry_->RecordRpc(method_, CodeName(m->GetSendStatus().error_code()), s);
      registry_->AddBytes("grpc", in_, out_);
    }
    m->Proceed();
  }

 private:
  Registry* registry_;
  std::string method_;
  bool protobuf_;
  std::chrono::steady_clock::time_point start_;
  uint64_t in_ = 0, out_ = 0;
};

class RpcInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcInterceptorFactory(Registry* r) : registry_(r) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RpcInterceptor(info, registry_);
  }

 private:
  Registry* registry_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcInterceptors(Registry* registry) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> v;
  v.push_back(std::make_unique<RpcInterceptorFactory>(registry));
  return v;
}

}  // namespace clf::server::metrics
