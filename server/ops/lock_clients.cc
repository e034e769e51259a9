#include "server/ops/lock_clients.h"

namespace clf::server {

void LockClients::Add(locking::SessionId session, Client client) {
  std::lock_guard<std::mutex> l(mu_);
  clients_[session] = std::move(client);
}

std::optional<LockClients::Client> LockClients::Remove(locking::SessionId session) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = clients_.find(session);
  if (it == clients_.end()) return std::nullopt;
  Client c = std::move(it->second);
  clients_.erase(it);
  return c;
}

std::optional<std::string> LockClients::NameOf(locking::SessionId session) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = clients_.find(session);
  if (it == clients_.end()) return std::nullopt;
  return it->second.name;
}

std::optional<uint32_t> LockClients::LeaseMsOf(locking::SessionId session) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = clients_.find(session);
  if (it == clients_.end()) return std::nullopt;
  return it->second.lease_ms;
}

void LockClients::Describe(v1::ListLocksReply* rep) const {
  std::lock_guard<std::mutex> l(mu_);
  for (v1::LockHolder& h : *rep->mutable_locks()) {
    auto it = clients_.find(h.session());
    if (it == clients_.end()) continue;
    h.set_client_name(it->second.name);
    h.set_client_address(it->second.address);
  }
}

std::vector<locking::SessionId> LockClients::Ids() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<locking::SessionId> ids;
  ids.reserve(clients_.size());
  for (const auto& [id, client] : clients_) ids.push_back(id);
  return ids;
}

size_t LockClients::size() const {
  std::lock_guard<std::mutex> l(mu_);
  return clients_.size();
}

}  // namespace clf::server
