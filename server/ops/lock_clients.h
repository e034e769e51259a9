// LockClients: who opened each lock session (a part of LockOps,
// server/ops/lock_ops.h): the client's name and address and the lease it was
// granted, for listings (`clf locks`), conflict replies (Test, PosixTest),
// the expiry log, RenewSession's reply and the state file's session list.
//
// It does not decide liveness: locking::SessionTable, inside the LockManager,
// does (ids, leases, expiry; LockOps::CheckSession asks it). This table sits
// beside it because the manager's table is private to the manager and guarded
// by its mutex, and every manager call may expire sessions and run LockOps'
// expiry callback on the calling thread, so LockOps cannot read it under its
// own locks. An entry is added once the manager opened the session and removed
// when LockOps learns the session ended (CloseSession, or the manager's expiry
// callback), so between an expiry and its callback it still lists the session.
//
// Thread safety: every method may be called from any thread. Lock order: mu_ is
// a leaf (LockStateFile's mutex may be held when Ids() is called).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "clf/v1/lock.pb.h"
#include "locking/lock_types.h"

namespace clf::server {

class LockClients {
 public:
  struct Client {
    std::string name, address;
    uint32_t lease_ms = 0;
  };

  void Add(locking::SessionId session, Client client);
  // Forgets the session; returns what was known of it.
  std::optional<Client> Remove(locking::SessionId session);
  std::optional<std::string> NameOf(locking::SessionId session) const;
  std::optional<uint32_t> LeaseMsOf(locking::SessionId session) const;
  // Sets the client name and address of every holder whose session is known.
  void Describe(v1::ListLocksReply* rep) const;
  std::vector<locking::SessionId> Ids() const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<locking::SessionId, Client> clients_;
};

}  // namespace clf::server
