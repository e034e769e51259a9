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

}  // namespace clf
