// ClientModeOps: metadata_mode = "client", paper 004's client-driven
// baseline (the Baseline service). The client reserves a handle on P (= M),
// creates the objects on each data server itself with a CREATE capability,
// then has P commit entry + inode; an unlink returns a REMOVE capability and
// the client removes the objects. No server-to-server call is made on these
// paths. The namespace steps are MetaOps' (ReserveForCreate, Create,
// UnlinkHere, Remove); this class checks the mode, signs and checks the
// capabilities, and serves the object calls.
#pragma once

#include <cstdint>
#include <string>

#include "clf/v1/baseline.pb.h"
#include "common/config.h"
#include "common/status.h"
#include "server/data/object_store.h"

namespace clf::server {

class MetaOps;

class ClientModeOps {
 public:
  ClientModeOps(const ClusterConfig& cluster, MetaOps* meta, ObjectStore* objects)
      : cluster_(cluster), meta_(meta), objects_(objects) {}

  // Capabilities are signed with this key (the servers' peer secret); set
  // before serving, read-only afterwards. Empty: the calls that sign refuse.
  void set_capability_key(std::string key) { cap_key_ = std::move(key); }
  // How long a capability is valid: a few RPC deadlines.
  uint64_t capability_ttl_ms() const { return 4ull * cluster_.rpc_timeout_ms; }

  Result<v1::ReserveReply> Reserve(const v1::ReserveRequest& r);
  Result<v1::Attr> Create(const v1::CreateRequest& r, v1::Attr* parent_out);
  Result<v1::UnlinkReply> Unlink(const v1::RemoveRequest& r);
  // CreateObject / RemoveObject with a capability for `op`.
  Status Object(const v1::ObjectRequest& r, v1::CapOp op);
  Result<v1::ObjectReply> StatObject(Handle h);

 private:
  Status CheckMode() const;
  v1::Capability Sign(Handle h, v1::CapOp op) const;

  const ClusterConfig& cluster_;
  MetaOps* const meta_;
  ObjectStore* const objects_;
  std::string cap_key_;
};

}  // namespace clf::server
