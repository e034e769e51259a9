// libclf's cluster calls: every server's Admin.Status at once (statfs and
// `clf status`), and the object listing and removal fsck uses. Internal to
// client/. Thread safety: thread safe; StatFs's callback runs on a gRPC thread.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "clf/client.h"
#include "client/rpc_channel.h"

namespace clf::client {

class AdminClient {
 public:
  // rpc outlives this.
  explicit AdminClient(RpcChannel& rpc) : rpc_(rpc) {}

  void StatFs(Callback<struct StatFs> cb);
  std::vector<ServerStatus> ServerStatuses();
  Result<Client::ObjectListing> ListObjects(ServerId server);
  Status RemoveDataObject(ServerId server, Handle h);

 private:
  // Admin.Status of every server in parallel; `done` gets them by server.
  void StatusAll(std::function<void(std::vector<std::pair<Status, v1::StatusReply>>)> done,
                 uint32_t timeout_ms);

  RpcChannel& rpc_;
};

}  // namespace clf::client
