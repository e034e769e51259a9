// Who a process is on the wire, and what a caller may do.
//
// Two kinds of credential, chosen by the cluster file:
//   - without [tls]: a shared secret in the `clf-secret` metadata header of
//     every gRPC call (and an HMAC challenge on the data channel). Clients hold
//     `secret_file`; servers hold `peer_secret_file` too, and use it on Peer
//     calls. A caller presenting the client secret has the client role, the
//     peer secret the server role.
//   - with [tls]: mutual TLS. Every certificate is signed by the cluster CA and
//     carries its role in the subject's OU: "server" or "client" (written by
//     `clf certs`). No secret is sent.
//
// Roles: kClient may call Meta, Data, Lock, Admin.Status and Admin.ListObjects;
// kServer may call everything (Peer, Admin.RemoveObject). Servers check the
// role of every call (server/service/auth.*).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "common/config.h"
#include "common/status.h"

struct x509_st;
struct ssl_ctx_st;

namespace clf {

enum class Role { kNone, kClient, kServer };
const char* RoleName(Role r);
// The subject OU values that name a role.
inline constexpr const char* kServerRoleOu = "server";
inline constexpr const char* kClientRoleOu = "client";

struct Credentials {
  bool tls = false;
  std::string secret;                     // without TLS: sent in clf-secret
  std::string ca_pem, cert_pem, key_pem;  // with TLS
  Role role = Role::kNone;                // the role this credential carries
  bool encrypt_data = true;  // with TLS: the data channel stays encrypted after the handshake
};

// A client's credential: the cluster file's client certificate (or cert_path /
// key_path when set), or its secret (or secret_path when set: an operator may
// point a tool at the peer secret to act as a server, e.g. to remove objects).
Result<Credentials> LoadClientCredentials(const ClusterConfig& c, const std::string& cert_path = "",
                                          const std::string& key_path = "",
                                          const std::string& secret_path = "");
// Server k's own credential (certificate, or the peer secret), for its listener
// and its calls to peers.
Result<Credentials> LoadServerCredentials(const ClusterConfig& c, ServerId k);

// Channel credentials for `cred` (SslCredentials with its certificate, or insecure).
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentialsFor(const Credentials& cred);
// Adds what each call carries (the secret header without TLS; nothing with TLS).
void AddCallCredentials(grpc::ClientContext* ctx, const Credentials& cred);
// Server credentials: TLS requiring and verifying a client certificate signed by
// the CA, or insecure without TLS.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const Credentials& cred);

// The role a certificate carries: its subject's OU ("server" / "client"); kNone otherwise.
Role RoleOfCertificate(x509_st* cert);
Role RoleOfPem(std::string_view pem);

// Reads a PEM file; a key file (is_key) must not be readable by group or others.
Result<std::string> ReadPemFile(const std::string& path, bool is_key);

// An OpenSSL context for the TCP data channel: our certificate and key, the CA
// as the only trust anchor, peer verification required (both ends), TLS >= 1.2,
// no session tickets. Owned by the caller (SSL_CTX_free; shared_ptr below).
using SslCtxPtr = std::shared_ptr<ssl_ctx_st>;
Result<SslCtxPtr> MakeDataTlsContext(const Credentials& cred, bool server);

// The last OpenSSL error queue entries as text (and clears the queue).
std::string OpenSslErrors();

}  // namespace clf
