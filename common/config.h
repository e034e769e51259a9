// The cluster description (one TOML file) parsed into plain structs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/handle.h"
#include "common/layout.h"
#include "common/sched_settings.h"
#include "common/status.h"

namespace clf {

struct ServerConfig {
  ServerId id = 0;
  std::string address;       // host:port for gRPC
  std::string rdma_address;  // host:port of the RDMA listener; empty = host:(data port + 1)
  std::string data_dir;
  std::string metrics_address;  // optional host:port of the Prometheus /metrics endpoint
  std::string data_address;  // host:port of the TCP data channel; empty = host:(gRPC port + 1000)
  // With [tls]: this server's certificate and key (PEM); empty = <tls.dir>/server-<id>.{crt,key}.
  std::string tls_cert, tls_key;
};

// Mutual TLS ([tls] in the cluster file). Present (dir or ca set) = every gRPC
// call and the data channel use TLS with certificates signed by the cluster CA,
// and the certificate's role (OU "server" or "client") decides what a caller
// may do; the secrets are then not used. Empty paths default to files in dir:
// ca.crt, client.crt / client.key, and per server server-<id>.crt / .key.
struct TlsConfig {
  std::string dir;
  std::string ca;
  std::string client_cert, client_key;
  // false: the data channel authenticates with TLS, then carries frames in
  // plaintext (for trusted networks where the cipher costs too much).
  bool encrypt_data = true;
  bool enabled() const { return !dir.empty() || !ca.empty(); }
  std::string CaPath() const;
  std::string ClientCertPath() const;
  std::string ClientKeyPath() const;
};

// How bulk data travels between clients and servers. kAuto = RDMA when this
// host has a hardware RDMA provider (verbs), else the TCP data channel; kRdma =
// RDMA over libfabric with the cluster's rdma_provider (no fallback); kTcp =
// the TCP data channel. auto falls back (RDMA -> TCP -> inline gRPC) only when
// a server's port is unreachable.
enum class TransportKind { kAuto, kTcp, kRdma, kGrpc };
std::string_view TransportName(TransportKind t);
Result<TransportKind> ParseTransport(std::string_view name);
// Checks that `t` can be used by this build.
Status CheckTransport(TransportKind t);
// libfabric providers the RDMA path may use: "auto" (verbs, else tcp), "tcp"
// (sockets: runs the same one-sided code anywhere), "verbs" (InfiniBand/RoCE).
Status CheckRdmaProvider(std::string_view p);
// The data channel address of a server: data_address, or the gRPC host with port + 1000.
Result<std::string> DataAddressOf(const ServerConfig& s);
inline constexpr int kDataPortOffset = 1000;
// The RDMA listener's address of a server: rdma_address, or the data address's
// host with port + 1.
Result<std::string> RdmaAddressOf(const ServerConfig& s);

// How a file create reaches the data servers (paper 004 and its baseline):
//   kOneHop     (default) one request to the directory's server; data objects are
//               created lazily by the first write to each server (no collective).
//   kCollective paper 004's server-driven create: the directory's server runs a
//               CREATE collective over the file's data servers before replying.
//   kClient     paper 004's client-driven baseline: the client creates, removes and
//               stats each data object itself (Baseline service, baseline.proto),
//               with capabilities the metadata server signs with the peer secret
//               (so peer_secret_file is required, also with [tls]).
enum class MetadataMode { kOneHop, kCollective, kClient };
const char* MetadataModeName(MetadataMode m);

struct ClusterConfig {
  std::string name = "clf";
  std::string secret_file;       // without TLS: the clients' secret; every client RPC carries it
  std::string peer_secret_file;  // without TLS: the servers' secret (server hosts only)
  TlsConfig tls;                 // [tls]: mutual TLS instead of the secrets
  Layout default_layout;         // stripe_count 0 in the file means "all servers"
  MetadataMode metadata_mode = MetadataMode::kOneHop;
  bool sync_metadata = false;    // sync the RocksDB WAL on every metadata change
  bool root_squash = false;
  uint32_t rpc_timeout_ms = 5000;  // per hop deadline for client and server calls
  // Directory leases (async creates/unlinks on a mount): how long a lease
  // lasts without renewal; 0 turns leases off (every change is synchronous).
  uint32_t dir_lease_ms = 5000;
  // Lock reclaim window after a server restart that lost granted locks
  // (docs/locking.md); 0: twice the default lock lease (30 s).
  uint32_t lock_grace_ms = 0;
  // The purge throttle: the data objects of removed files are removed in the
  // background, held back while a client request reached the server less
  // than purge_idle_ms ago (0: never held back), and never longer than
  // purge_max_defer_ms after the removal.
  uint32_t purge_idle_ms = 200;
  uint32_t purge_max_defer_ms = 30000;
  // Early writeback: a write of at least this many KiB to a data object has
  // its disk writeback started at once (server/data/object_store.h); 0: off,
  // the kernel's flusher (or the client's fsync) writes it.
  uint32_t early_writeback_kib = 256;
  // Server read-ahead: a read of a data object that continues an earlier read
  // of it has the object's next this-many KiB asked from the disk at once
  // (server/data/object_store.h); 0: off, the kernel's own readahead only.
  uint32_t read_ahead_kib = 4096;
  // Direct writes: a write of at least this many KiB to a data object whose
  // extents start and end on 4 KiB goes to the disk with O_DIRECT instead of
  // through the server's page cache (server/data/object_store.h); 0 (the
  // default): every write goes through the page cache.
  uint32_t direct_write_kib = 0;
  TransportKind transport = TransportKind::kAuto;  // [cluster] transport = "auto|tcp|rdma|grpc"
  // Data-path scheduling (paper 000), [cluster] sched = "hash-ios" (or first-ios,
  // random-ios), sched_block = "1M" (0 = the file's stripe size), sched_window = N
  // (0 = the file's number of data servers). A mount (-o sched=...) or a
  // directory's layout (clf setlayout --sched) overrides these for its files.
  // Replicated files' reads: [cluster] read_sched = "eatf" (paper 001's
  // heuristics pick the copy serving each block; -o read_sched, setlayout
  // --read-sched override it the same way).
  SchedSettings sched;
  // Reads served at once by a data server for scheduled requests; the others
  // wait in a queue served in the clients' policy order. 0: no queue (arrival order).
  uint32_t sched_server_slots = 2;
  // A waiting read passed over by this many later ones is served next (no starvation).
  uint32_t sched_max_bypass = 64;
  std::string rdma_provider = "auto";  // [cluster] rdma_provider = "auto|tcp|verbs"
  std::vector<ServerConfig> servers;  // index == id

  uint32_t size() const { return static_cast<uint32_t>(servers.size()); }
  Status Validate() const;
  // With TLS: server k's certificate and key paths (tls_cert/tls_key, else in tls.dir).
  std::string ServerCertPath(ServerId k) const;
  std::string ServerKeyPath(ServerId k) const;
};

// Parses a cluster file. Relative paths are resolved against the file's folder.
// Errors in the file name its line ("line 7: stripe_size must be an integer").
Result<ClusterConfig> LoadClusterConfig(const std::string& path);
Result<ClusterConfig> ParseClusterConfig(const std::string& toml_text, const std::string& base_dir);
// Renders a cluster file that LoadClusterConfig reads back to the same config.
std::string RenderClusterConfig(const ClusterConfig& c);

// Reads the cluster secret (trailing whitespace trimmed); refuses files readable by others.
Result<std::string> ReadSecret(const std::string& path);

// Name rules of every namespace request: not empty, no '/', no NUL, <= 255 bytes,
// and not "." or "..".
Status ValidateName(std::string_view name);
inline constexpr size_t kMaxNameBytes = 255;
inline constexpr size_t kMaxSymlinkBytes = 4095;
// Most names (hard links) one file may have (EMLINK past it).
inline constexpr uint32_t kMaxLinks = 65000;
inline constexpr size_t kMaxXattrNameBytes = 255;
inline constexpr size_t kMaxXattrValueBytes = 64 * 1024;
inline constexpr uint64_t kMaxIoBytes = 64ull << 20;     // bytes in one data request
inline constexpr size_t kMaxExtents = 1 << 20;           // extents in one data request

}  // namespace clf
