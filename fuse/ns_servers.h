// NsServers: what AsyncNs asks of the metadata servers (directory leases,
// their recalls, commits of queued changes). The mount passes its
// client::Client through ClientNsServers; unit tests pass a fake that
// answers by hand.
#pragma once

#include <cstdint>
#include <vector>

#include "client/include/clf/client.h"

namespace clf::fuse {

class NsServers {
 public:
  virtual ~NsServers() = default;
  // How many servers the cluster has (a new file's first server).
  virtual uint32_t servers() const = 0;
  virtual void AcquireDirLease(Handle dir, uint32_t handles_wanted, bool with_attrs,
                               client::Caller caller,
                               client::Callback<client::DirLeaseGrant> cb) = 0;
  virtual void ReleaseDirLease(Handle dir, client::StatusCallback cb) = 0;
  virtual void EndLeaseSession(ServerId s, client::StatusCallback cb) = 0;
  virtual void LeaseEvents(ServerId s, uint32_t wait_ms,
                           client::Callback<std::vector<Handle>> cb) = 0;
  virtual void Commit(ServerId s, std::vector<client::CommitOp> ops,
                      client::Callback<std::vector<Status>> cb) = 0;
};

// The mount's: every call goes to the client library.
class ClientNsServers final : public NsServers {
 public:
  explicit ClientNsServers(client::Client* c) : c_(c) {}
  uint32_t servers() const override { return static_cast<uint32_t>(c_->cluster().size()); }
  void AcquireDirLease(Handle dir, uint32_t handles_wanted, bool with_attrs, client::Caller caller,
                       client::Callback<client::DirLeaseGrant> cb) override {
    c_->AcquireDirLease(dir, handles_wanted, with_attrs, std::move(caller), std::move(cb));
  }
  void ReleaseDirLease(Handle dir, client::StatusCallback cb) override {
    c_->ReleaseDirLease(dir, std::move(cb));
  }
  void EndLeaseSession(ServerId s, client::StatusCallback cb) override {
    c_->EndLeaseSession(s, std::move(cb));
  }
  void LeaseEvents(ServerId s, uint32_t wait_ms, client::Callback<std::vector<Handle>> cb) override {
    c_->LeaseEvents(s, wait_ms, std::move(cb));
  }
  void Commit(ServerId s, std::vector<client::CommitOp> ops,
              client::Callback<std::vector<Status>> cb) override {
    c_->Commit(s, std::move(ops), std::move(cb));
  }

 private:
  client::Client* const c_;
};

}  // namespace clf::fuse
