// Peers: how ops/ reaches other servers. Implemented over gRPC in service/;
// ops/ sees only this interface and protobuf messages.
// Thread safety: implementations are thread safe. Async callbacks run on an RPC
// thread and must not block.
#pragma once

#include <functional>
#include <vector>

#include "clf/v1/peer.pb.h"
#include "common/handle.h"
#include "common/status.h"

namespace clf::server {

class Peers {
 public:
  virtual ~Peers() = default;
  virtual void Collective(ServerId to, const v1::CollectiveRequest& req,
                          std::function<void(Status, v1::CollectiveReply)> cb) = 0;
  virtual Result<v1::Attr> MakeDir(ServerId to, const v1::MakeDirRequest& req) = 0;
  virtual Status RemoveDir(ServerId to, Handle h) = 0;
  virtual Result<v1::AdjustLinkReply> AdjustLink(ServerId to, const v1::AdjustLinkRequest& req) = 0;
  virtual Result<std::vector<v1::Attr>> GetAttrs(ServerId to, const std::vector<Handle>& hs) = 0;
  // GetAttrs without waiting: `cb` runs once, on an RPC thread (or inline
  // here, as this default does for implementations without an async path).
  virtual void GetAttrsAsync(ServerId to, const std::vector<Handle>& hs,
                             std::function<void(Result<std::vector<v1::Attr>>)> cb) {
    cb(GetAttrs(to, hs));
  }
  virtual Result<v1::InsertEntryReply> InsertEntry(ServerId to,
                                                   const v1::InsertEntryRequest& req) = 0;
  virtual Result<v1::ResolveRenameReply> ResolveRename(ServerId to,
                                                       const v1::ResolveRenameRequest& req) = 0;
  // Not pure: a Peers without it (a one-server test double) never prunes, which is safe.
  virtual Result<v1::ForgetRenamesReply> ForgetRenames(ServerId /*to*/,
                                                       const v1::ForgetRenamesRequest& /*req*/) {
    return Status(Code::kNotSupported, "Peer.ForgetRenames");
  }
  // Replicated data: a file's replica state on its metadata server, and M
  // telling a holder of its copies that it changed (`cb` runs once). Not
  // pure: test doubles without replication refuse them.
  virtual Result<v1::ReplicasReply> Replicas(ServerId /*to*/, const v1::ReplicasRequest& /*req*/) {
    return Status(Code::kNotSupported, "Peer.Replicas");
  }
  virtual void ReplicasChanged(ServerId /*to*/, Handle /*h*/, std::function<void(Status)> cb) {
    cb(Status(Code::kNotSupported, "Peer.ReplicasChanged"));
  }
  virtual Result<v1::AnnounceStoreReply> AnnounceStore(ServerId /*to*/,
                                                 const v1::AnnounceStoreRequest& /*req*/) {
    return Status(Code::kNotSupported, "Peer.AnnounceStore");
  }
};

}  // namespace clf::server
