#include "common/status_grpc.h"

#include <grpcpp/generic/generic_stub.h>

#include <chrono>
#include <future>
#include <memory>
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
    // Not UNAVAILABLE: that code is kept for gRPC's own "could not reach the
    // server", which the retry policy below retries. A server that answers
    // "a peer of mine is down" has answered; the exact code rides in the details.
    case Code::kUnavailable: gc = grpc::StatusCode::ABORTED; break;
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
    if (code > 0 && code <= static_cast<int>(Code::kLastCode)) {
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

namespace {

// gRPC retries these read-only calls when the server could not be reached
// (UNAVAILABLE from the channel, never from a server's answer: see ToGrpc).
// Channels reconnect after a backoff (below); a call made while its channel
// waits to reconnect to a server that has just come back would fail at once
// without this. Five attempts, waits drawn from up to 0.4, 0.8, 1.5,
// 1.5 s: about 2 s on average before a down server's error reaches the caller.
// Calls that change state are never retried here (the first attempt may have
// been carried out before its connection broke), except the replica-state
// calls, which are idempotent (marking a copy stale or current twice is
// marking it once).
constexpr const char* kRetryServiceConfig = R"json({
  "methodConfig": [{
    "name": [
      {"service": "clf.v1.Meta", "method": "Lookup"},
      {"service": "clf.v1.Meta", "method": "GetAttr"},
      {"service": "clf.v1.Meta", "method": "ReadDir"},
      {"service": "clf.v1.Meta", "method": "Readlink"},
      {"service": "clf.v1.Meta", "method": "GetXattr"},
      {"service": "clf.v1.Meta", "method": "ListXattr"},
      {"service": "clf.v1.Data", "method": "Read"},
      {"service": "clf.v1.Peer", "method": "GetAttrs"},
      {"service": "clf.v1.Peer", "method": "Replicas"},
      {"service": "clf.v1.Peer", "method": "ReplicasChanged"},
      {"service": "clf.v1.Admin", "method": "Status"},
      {"service": "clf.v1.Admin", "method": "ListObjects"},
      {"service": "clf.v1.Admin", "method": "FsckScan"},
      {"service": "clf.v1.Lock", "method": "Test"},
      {"service": "clf.v1.Lock", "method": "PosixTest"},
      {"service": "clf.v1.Lock", "method": "ListLocks"}
    ],
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.4s",
      "maxBackoff": "1.5s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
})json";

}  // namespace

grpc::ChannelArguments ClfChannelArgs() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 1);
  args.SetServiceConfigJSON(kRetryServiceConfig);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  // A channel whose server refused it tries again within 0.3 s (+-20%), so
  // calls fail for at most that long after the server is back; the retries
  // above wait longer than that before they give up. A refused connection
  // costs the down server's host next to nothing.
  args.SetInt("grpc.initial_reconnect_backoff_ms", 100);
  args.SetInt("grpc.max_reconnect_backoff_ms", 300);
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, kHttp2FrameBytes);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kHttp2WindowBytes);
  return args;
}

void HoldCallbackQueue() {
  // Never destroyed, on purpose: the channel's hold on the callback queue
  // lasts until exit, and the call's parts need not be freed while gRPC may
  // still be finishing it. Kept reachable from a static (not a leak to
  // LeakSanitizer); a few hundred bytes once per process.
  struct Held {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<grpc::GenericStub> stub;
    grpc::ClientContext ctx;
    grpc::ByteBuffer req, resp;
  };
  static Held* const held = [] {
    auto* h = new Held;
    h->channel = grpc::CreateChannel("unix:/nonexistent/clf-callback-queue",
                                     grpc::InsecureChannelCredentials());
    h->stub = std::make_unique<grpc::GenericStub>(h->channel);
    h->ctx.set_deadline(std::chrono::system_clock::now());
    grpc::Slice empty("");
    h->req = grpc::ByteBuffer(&empty, 1);  // an empty message (a default one is no message)
    // Shared with the callback: it may still be inside set_value when the
    // wait below returns.
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> landed = done->get_future();
    // The channel takes its reference to the queue as the call starts; the
    // call fails at once (deadline passed) without connecting.
    h->stub->UnaryCall(&h->ctx, "/clf.Hold/Queue", grpc::StubOptions(), &h->req, &h->resp,
                       [done](const grpc::Status&) { done->set_value(); });
    landed.wait();
    return h;
  }();
  (void)held;
}

}  // namespace clf
