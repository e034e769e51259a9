#include "common/status_grpc.h"

#include <string>

namespace clf {

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  grpc::StatusCode gc = grpc::StatusCode::UNKNOWN;
  switch (s.code()) {
    case Code::kNotFound: gc = grpc::StatusCode::NOT_FOUND; break;
    case Code::kExists: gc = grpc::StatusCode::ALREADY_EXISTS; break;
    case Code::kInvalid: case Code::kNameTooLong: gc = grpc::StatusCode::INVALID_ARGUMENT; break;
    case Code::kPermission: case Code::kNotPermitted: gc = grpc::StatusCode::PERMISSION_DENIED; break;
    case Code::kUnauthenticated: gc = grpc::StatusCode::UNAUTHENTICATED; break;
    case Code::kUnavailable: gc = grpc::StatusCode::UNAVAILABLE; break;
    case Code::kTimedOut: gc = grpc::StatusCode::DEADLINE_EXCEEDED; break;
    case Code::kNoSpace: gc = grpc::StatusCode::RESOURCE_EXHAUSTED; break;
    case Code::kNotSupported: gc = grpc::StatusCode::UNIMPLEMENTED; break;
    case Code::kInternal: gc = grpc::StatusCode::INTERNAL; break;
    default: gc = grpc::StatusCode::FAILED_PRECONDITION; break;
  }
  return grpc::Status(gc, s.message(), std::to_string(static_cast<int>(s.code())));
}

Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return Status::Ok();
  const std::string& d = s.error_details();
  if (!d.empty()) {
    int code = std::atoi(d.c_str());
    if (code > 0 && code <= static_cast<int>(Code::kBadFd)) {
      return Status(static_cast<Code>(code), s.error_message());
    }
  }
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return Unavailable("server unavailable: " + s.error_message());
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Unavailable("server did not answer in time: " + s.error_message());
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status(Code::kUnauthenticated, s.error_message());
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Status(Code::kTooBig, "message too large: " + s.error_message());
    case grpc::StatusCode::CANCELLED:
      return Status(Code::kCancelled, s.error_message());
    case grpc::StatusCode::UNIMPLEMENTED:
      return Status(Code::kNotSupported, s.error_message());
    default:
      return IoError("rpc failed (" + std::to_string(s.error_code()) + "): " + s.error_message());
  }
}

grpc::ChannelArguments ClfChannelArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt("grpc.initial_reconnect_backoff_ms", 200);
  args.SetInt("grpc.max_reconnect_backoff_ms", 1000);
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, kHttp2FrameBytes);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kHttp2WindowBytes);
  return args;
}

}  // namespace clf
