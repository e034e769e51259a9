// A gRPC server interceptor that records every call of clfd in a Registry:
// count by method and status code, latency from the call's arrival to its
// status, and message bytes in and out (transport "grpc").
//
// Why an interceptor rather than code in services.cc: it sees every call of
// every service at one place, including ones the handlers finish early
// (unauthenticated, invalid) and the gRPC health service, knows the method name
// and the final status, and needs no edit in the handlers.
#pragma once

#include <memory>
#include <vector>

#include <grpcpp/support/server_interceptor.h>

#include "server/metrics/registry.h"

namespace clf::server::metrics {

// Interceptor factories for ServerBuilder::experimental().SetInterceptorCreators.
// `registry` must outlive the server.
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcInterceptors(Registry* registry);

}  // namespace clf::server::metrics
