// One clfd's ops layer for the libFuzzer harnesses: a real RocksDB and object
// folder in a fresh temporary directory (removed at exit), a cluster of one
// server, so every valid request is served locally. Reaching a peer would mean
// a request that passed validation named another server: that traps, and
// libFuzzer reports it as a finding.
//
// Every harness parses its input as one request (the first byte picks the
// RPC, the rest is the message's protobuf encoding), runs the same
// validation as the gRPC adapters (server/service/validate.h) and, if it
// passes, the ops call the adapter would make.
// Thread safety: libFuzzer runs one input at a time; the server lives for the
// whole process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "server/data/object_store.h"
#include "server/ops/client_mode_ops.h"
#include "server/ops/data_ops.h"
#include "server/ops/dir_leases.h"
#include "server/ops/meta_ops.h"
#include "server/ops/replica_state.h"
#include "server/service/validate.h"
#include "server/store/meta_store.h"

namespace clf::fuzz {

struct FuzzServer {
  std::string dir;
  ClusterConfig cluster;
  std::unique_ptr<server::RocksMetaStore> store;
  std::unique_ptr<server::ObjectStore> objects;
  std::unique_ptr<server::Peers> peers;
  std::unique_ptr<server::MetaOps> ops;
  std::unique_ptr<server::ClientModeOps> client_mode;  // metadata_mode = "client"
  std::unique_ptr<server::DataOps> data;
  std::unique_ptr<server::ReplicaStateOps> replica_state;  // Peer.Replicas
  std::unique_ptr<server::DirLeases> leases;  // Meta.DirLease and Meta.Commit
  server::ClusterView view{1, 0};
};

// Created on first use (a few files and directories already in it, so the
// fuzzer finds handles to work on). Server() runs metadata_mode "onehop";
// ClientModeServer() runs "client" (the Baseline service) with a capability
// key (kCapabilityKey). A harness uses one of them.
FuzzServer& Server();
FuzzServer& ClientModeServer();
inline constexpr const char* kCapabilityKey = "fuzz-capability-key";

// Parses `data` after its first byte as `msg`; false if it does not parse.
bool ParseRest(const uint8_t* data, size_t size, google::protobuf::Message* msg);

}  // namespace clf::fuzz
