#include "server/service/auth.h"

#include "common/status_grpc.h"
#include "server/service/validate.h"

namespace clf::server {

Role RequiredRole(std::string_view method) {
  if (method.starts_with("Peer.")) return Role::kServer;
  if (method == "Admin.RemoveObject") return Role::kServer;
  if (method == "Admin.FsckRepair") return Role::kServer;
  return Role::kClient;
}

Role CallerRole(const grpc::ServerContextBase& ctx, const AuthConfig& auth) {
  if (auth.tls) {
    // gRPC verified the chain against the cluster CA before the call existed;
    // the role is the verified leaf certificate's OU.
    std::shared_ptr<const grpc::AuthContext> ac = ctx.auth_context();
    if (!ac || !ac->IsPeerAuthenticated()) return Role::kNone;
    std::vector<grpc::string_ref> pem = ac->FindPropertyValues(GRPC_X509_PEM_CERT_PROPERTY_NAME);
    if (pem.size() != 1) return Role::kNone;
    const std::string_view cert(pem[0].data(), pem[0].size());
    // A gRPC thread serves the same few peers over and over: remember the last
    // certificate it parsed (an exact byte comparison, not a hash).
    thread_local std::string last_pem;
    thread_local Role last_role = Role::kNone;
    if (cert != last_pem) {
      last_role = RoleOfPem(cert);
      last_pem.assign(cert);
    }
    return last_role;
  }
  const auto& md = ctx.client_metadata();
  auto it = md.find(kSecretHeader);
  if (it == md.end()) return Role::kNone;
  const std::string_view presented(it->second.data(), it->second.size());
  // Both comparisons run, so the time does not tell which secret was close.
  const bool peer = !auth.peer_secret.empty() && SecretMatches(presented, auth.peer_secret);
  const bool client = !auth.client_secret.empty() && SecretMatches(presented, auth.client_secret);
  if (peer) return Role::kServer;
  if (client) return Role::kClient;
  return Role::kNone;
}

Status CheckCaller(const grpc::ServerContextBase& ctx, const AuthConfig& auth,
                   std::string_view method) {
  const Role have = CallerRole(ctx, auth);
  if (have == Role::kNone) {
    return Status(
        Code::kUnauthenticated,
        auth.tls ? "no client certificate with a role (OU server or client) from the cluster CA"
                 : "wrong or missing cluster secret");
  }
  const Role need = RequiredRole(method);
  if (need == Role::kServer && have != Role::kServer) {
    return Status(Code::kPermission, std::string(method) +
                                         " is for servers only; the caller has the " +
                                         RoleName(have) + " role");
  }
  return Status::Ok();
}

}  // namespace clf::server
