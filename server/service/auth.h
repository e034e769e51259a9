// Who may call what on clfd: the caller's role (common/credentials.h) from its
// certificate (TLS) or the secret it sent (no TLS), checked against the role
// the method needs. One table, RequiredRole, holds the policy.
#pragma once

#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "common/credentials.h"
#include "common/status.h"

namespace clf::server {

struct AuthConfig {
  bool tls = false;
  std::string client_secret;  // without TLS: the clients' secret (client role)
  std::string peer_secret;    // without TLS: the servers' secret (server role)
};

// The role a method ("Service.Method") needs: kServer for every Peer method and
// for Admin.RemoveObject and Admin.FsckRepair; kClient (any authenticated caller) otherwise.
Role RequiredRole(std::string_view method);

// The caller's role: from the verified peer certificate's OU with TLS, else the
// clf-secret header compared in constant time with both secrets. kNone: no
// valid credential.
Role CallerRole(const grpc::ServerContextBase& ctx, const AuthConfig& auth);

// Ok when the caller may call `method`; kUnauthenticated without a valid
// credential, kPermission when its role is not enough (a client calling a
// server-only method).
Status CheckCaller(const grpc::ServerContextBase& ctx, const AuthConfig& auth,
                   std::string_view method);

}  // namespace clf::server
