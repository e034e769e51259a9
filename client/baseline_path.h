// libclf's path for metadata_mode = "client" (paper 004's client-driven
// baseline; server side in server/ops/client_mode.cc): the client itself
// contacts every data server of a file.
//   create: Baseline.Reserve on P (handle, layout, CREATE + undo REMOVE
//           capabilities) -> Baseline.CreateObject on each data server (in
//           parallel) -> Baseline.Create on P (entry + inode). A failure after
//           objects exist removes them with the undo capability.
//   remove: Baseline.Unlink on P (entry + inode, no garbage record) ->
//           Baseline.RemoveObject on each data server with the reply's capability.
//   stat:   Meta.GetAttr on M -> Baseline.StatObject on each data server; size
//           = max(M's, the objects' logical end), blocks = their sum.
// Internal to client/ (protobuf types); GrpcClient dispatches to it.
// Thread safety: thread safe; callbacks run on gRPC threads. Its calls go
// through the RpcChannel's Unary, so the channel's owner waits for them.
#pragma once

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "clf/v1/baseline.grpc.pb.h"
#include "clf/v1/meta.grpc.pb.h"
#include "client/rpc_channel.h"
#include "common/config.h"
#include "common/status.h"

namespace clf::client {

class BaselinePath {
 public:
  // rpc outlives this.
  explicit BaselinePath(RpcChannel& rpc);

  // r: a regular file's create request (handle unset), for server s = ServerOf(r.parent()).
  void Create(ServerId s, v1::CreateRequest r, std::function<void(Status, v1::AttrReply&)> done);
  void Remove(ServerId s, v1::RemoveRequest r, std::function<void(Status, v1::RemoveReply&)> done);
  void GetAttr(ServerId s, v1::GetAttrRequest r, std::function<void(Status, v1::AttrReply&)> done);

 private:
  struct Op;
  // Runs `call` on every data server of `layout` in parallel; `done` gets the
  // first error (naming the server) and the replies by position.
  void FanOut(const v1::Layout& layout,
              std::function<void(ServerId, grpc::ClientContext*, v1::ObjectReply*,
                                 std::function<void(grpc::Status)>)>
                  call,
              std::function<void(Status, std::vector<std::pair<ServerId, v1::ObjectReply>>)> done);
  // Removes the objects of a failed create, then runs `then`.
  void Undo(const v1::Layout& layout, const v1::Capability& cap, std::function<void()> then);

  RpcChannel& rpc_;
  std::vector<std::unique_ptr<v1::Baseline::Stub>> base_;
};

}  // namespace clf::client
