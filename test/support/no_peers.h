// NoPeers: the Peers of a server with no other servers (a one-server
// cluster, or a part tested alone). Every call to a peer fails Unavailable;
// a test overrides the calls it means to see.
#pragma once

#include "server/ops/peers.h"

namespace clf::server {

class NoPeers : public Peers {
 public:
  void Collective(ServerId, const v1::CollectiveRequest&,
                  std::function<void(Status, v1::CollectiveReply)> cb) override {
    cb(Unavailable("no peers"), {});
  }
  Result<v1::Attr> MakeDir(ServerId, const v1::MakeDirRequest&) override {
    return Unavailable("no peers");
  }
  Status RemoveDir(ServerId, Handle) override { return Unavailable("no peers"); }
  Result<v1::AdjustLinkReply> AdjustLink(ServerId, const v1::AdjustLinkRequest&) override {
    return Unavailable("no peers");
  }
  Result<std::vector<v1::Attr>> GetAttrs(ServerId, const std::vector<Handle>&) override {
    return Unavailable("no peers");
  }
  Result<v1::InsertEntryReply> InsertEntry(ServerId, const v1::InsertEntryRequest&) override {
    return Unavailable("no peers");
  }
  Result<v1::ResolveRenameReply> ResolveRename(ServerId,
                                               const v1::ResolveRenameRequest&) override {
    return Unavailable("no peers");
  }
};

}  // namespace clf::server
