// The namespace calls of libclf (Client's lookup .. destroy, directory
// leases and lease commits) as Meta RPCs to the server a handle routes to;
// metadata_mode = "client" creates, removes and stats through BaselinePath.
// Keeps the directory-attribute cache current with what the replies carry.
// Internal to client/; GrpcClient forwards to it.
// Thread safety: thread safe. Callbacks run on gRPC threads, or inline on the
// caller's before the call returns (validation errors, cached attributes).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "clf/client.h"
#include "client/baseline_path.h"
#include "client/dir_attr_cache.h"
#include "client/rpc_channel.h"

namespace clf::client {

class NamespaceClient {
 public:
  // baseline: null unless metadata_mode = "client". All three outlive this.
  NamespaceClient(RpcChannel& rpc, DirAttrCache& dirs, BaselinePath* baseline)
      : rpc_(rpc), dirs_(dirs), baseline_(baseline) {}

  void Lookup(Handle parent, std::string name, Caller caller, Callback<Attr> cb);
  void GetAttr(Handle h, Caller caller, Callback<Attr> cb);
  void SetAttr(Handle h, SetAttrArgs a, Caller caller, Callback<Attr> cb);
  void Create(Handle parent, std::string name, CreateArgs a, Caller caller, Callback<Attr> cb);
  void ReportWrite(Handle h, ReportWriteArgs a, Caller caller, Callback<Attr> cb);
  void Link(Handle h, Handle new_parent, std::string new_name, Caller caller, Callback<Attr> cb);
  void Remove(Handle parent, std::string name, bool directory, bool keep_orphan, Caller caller,
              Callback<RemoveResult> cb);
  void Rename(Handle sp, std::string sn, Handle dp, std::string dn, uint32_t flags,
              bool keep_orphan, Caller caller, Callback<RemoveResult> cb);
  void ReadDir(Handle dir, std::string after, uint32_t max_entries, bool plus, Caller caller,
               Callback<DirPage> cb);
  void AcquireDirLease(Handle dir, uint32_t handles_wanted, bool with_attrs, Caller caller,
                       Callback<DirLeaseGrant> cb);
  void ReleaseDirLease(Handle dir, StatusCallback cb);
  void EndLeaseSession(ServerId s, StatusCallback cb);
  void LeaseEvents(ServerId s, uint32_t wait_ms, Callback<std::vector<Handle>> cb);
  void Commit(ServerId s, std::vector<CommitOp> ops, Callback<std::vector<Status>> cb);
  void Readlink(Handle h, Caller caller, Callback<std::string> cb);
  void GetXattr(Handle h, std::string name, Caller caller, Callback<std::string> cb);
  void SetXattr(Handle h, std::string name, std::string value, uint32_t flags, Caller caller,
                StatusCallback cb);
  void ListXattr(Handle h, Caller caller, Callback<std::vector<std::string>> cb);
  void RemoveXattr(Handle h, std::string name, Caller caller, StatusCallback cb);
  void Destroy(Handle h, StatusCallback cb);

 private:
  // An AttrReply's completion: caches the directory attributes it carries.
  std::function<void(Status, v1::AttrReply&)> AttrDone(Callback<Attr> cb);
  v1::XattrRequest XReq(Handle h, std::string name, const Caller& caller);

  RpcChannel& rpc_;
  DirAttrCache& dirs_;
  BaselinePath* const baseline_;
};

}  // namespace clf::client
