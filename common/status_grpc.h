// The only place grpc::Status and clf::Status meet. The exact clf::Code travels
// in the grpc status details.
#pragma once

#include <grpcpp/grpcpp.h>

#include "common/status.h"

namespace clf {

grpc::Status ToGrpc(const Status& s);
Status FromGrpc(const grpc::Status& s);

// Metadata key carrying the cluster secret on every RPC.
inline constexpr const char* kSecretHeader = "clf-secret";
// The client's session (decimal), for directory leases; absent = no session.
inline constexpr const char* kSessionHeader = "clf-session";

// Limits and HTTP/2 settings shared by every clf channel and server.
inline constexpr int kMaxMessageBytes = 80 << 20;
inline constexpr int kHttp2FrameBytes = (1 << 24) - 1;  // the HTTP/2 maximum
inline constexpr int kHttp2WindowBytes = 64 << 20;
// Channel arguments for every clf channel: message caps, keepalive, quick
// reconnects, retries of read-only calls that could not reach their server,
// and for 1 MiB data messages big HTTP/2 frames and a stream window that
// holds a whole request.
grpc::ChannelArguments ClfChannelArgs();

// gRPC 1.51 runs callback-API completions on one process-wide queue that it
// tears down when the last channel that used it is destroyed, and builds
// anew for the next call; a teardown racing the completion thread's last
// steps aborts the process ("ref_counted.h: assertion failed: prior > 0"),
// seen when one process opens and closes clients one after another (`clf
// bench transport`, a client per row). Every client calls this before its
// first callback call: the first call in a process makes a channel that
// holds that queue until the process exits (never destroyed; it never
// connects: its one call has an expired deadline).
void HoldCallbackQueue();

}  // namespace clf
