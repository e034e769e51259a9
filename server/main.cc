// clfd: one Clusterfile server. `clfd --cluster FILE --id K` runs server K in the
// foreground; SIGTERM or SIGINT stops it cleanly.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/config.h"
#include "common/credentials.h"
#include "common/executor.h"
#include "common/log.h"
#include "common/malloc_tuning.h"
#include "common/status_grpc.h"
#include "common/version.h"
#include "server/data/object_store.h"
#include "server/ops/lock_ops.h"
#include "server/metrics/http_exporter.h"
#include "server/metrics/rpc_interceptor.h"
#include "server/metrics/server_gauges.h"
#include "common/transport/rdma_transport.h"
#include "server/service/data_server.h"
#include "server/ops/data_ops.h"
#include "server/ops/meta_ops.h"
#include "server/ops/resync.h"
#include "server/service/baseline_service.h"
#include "server/service/lock_service.h"
#include "server/service/services.h"
#include "server/store/meta_store.h"

namespace {

int Fail(const clf::Status& s) {
  std::fprintf(stderr, "clfd: %s\n", s.ToString().c_str());
  CLF_LOG_ERROR("{}", s.ToString());
  spdlog::default_logger()->flush();
  return 1;
}

// How this server authenticates on the data channels: with [tls] its
// certificate in a context for the listening end (`server`) or for dialling
// other servers (forwarding replicated writes); else the clients' secret.
clf::Result<clf::transport::DataChannelAuth> DataAuthOf(const clf::ClusterConfig& cluster,
                                                        const clf::Credentials& cred,
                                                        const std::string& secret, bool server) {
  clf::transport::DataChannelAuth a;
  if (!cred.tls) {
    a.secret = secret;
    return a;
  }
  CLF_ASSIGN_OR_RETURN(a.tls, clf::MakeDataTlsContext(cred, server));
  a.encrypt_data = cluster.tls.encrypt_data;
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  clf::TuneMalloc();
  CLI::App app{"clfd: Clusterfile server"};
  app.set_version_flag("--version", std::string("clfd ") + clf::kVersion);
  std::string cluster_file, log_file, pid_file, log_level = "info";
  uint32_t id = 0;
  app.add_option("--cluster", cluster_file, "cluster file (TOML)")->required();
  app.add_option("--id", id, "this server's id in the cluster file")->required();
  app.add_option("--log-file", log_file, "log here instead of stderr");
  app.add_option("--pid-file", pid_file, "write the pid here once listening");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  CLI11_PARSE(app, argc, argv);

  // Signals are taken by sigwait in main; every thread created later inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  clf::log::Init("clfd" + std::to_string(id), log_level, log_file);
  clf::Result<clf::ClusterConfig> cluster = clf::LoadClusterConfig(cluster_file);
  if (!cluster.ok()) return Fail(cluster.status());
  if (id >= cluster->size()) return Fail(clf::Invalid("--id " + std::to_string(id) + " is not in the cluster file"));
  const clf::ServerConfig& me = cluster->servers[id];
  // Our own credential (certificate or peer secret) and what callers must present.
  clf::Result<clf::Credentials> cred = clf::LoadServerCredentials(*cluster, id);
  if (!cred.ok()) return Fail(cred.status());
  clf::server::AuthConfig auth;
  auth.tls = cred->tls;
  if (!cred->tls) {
    clf::Result<std::string> secret = clf::ReadSecret(cluster->secret_file);
    if (!secret.ok()) return Fail(secret.status());
    auth.client_secret = *secret;
    auth.peer_secret = cred->secret;
    if (auth.client_secret == auth.peer_secret) {
      return Fail(
          clf::Invalid("the peer secret equals the client secret: clients could act as servers"));
    }
  }
  clf::Result<clf::transport::DataChannelAuth> data_auth =
      DataAuthOf(*cluster, *cred, auth.client_secret, /*server=*/true);
  if (!data_auth.ok()) return Fail(data_auth.status().WithContext("data channel TLS"));
  // Without TLS a connection proving the servers' secret is a server's (the
  // only ones whose forwarded copies' writes are taken).
  if (!cred->tls) data_auth->server_secret = auth.peer_secret;

  std::error_code mk_ec;
  std::filesystem::create_directories(me.data_dir, mk_ec);
  if (mk_ec) return Fail(clf::IoError("create data dir " + me.data_dir + ": " + mk_ec.message()));
  auto store = clf::server::RocksMetaStore::Open(me.data_dir + "/meta", cluster->sync_metadata);
  if (!store.ok()) return Fail(store.status());
  // A store made now (a new server, or one whose disk was lost): its copies
  // of replicated files are not there (Replication::SetLostCopies).
  const bool fresh_store = !std::filesystem::exists(me.data_dir + "/objects");
  auto objects = clf::server::ObjectStore::Open(me.data_dir + "/objects",
                                                uint64_t{cluster->early_writeback_kib} << 10,
                                                uint64_t{cluster->read_ahead_kib} << 10);
  if (!objects.ok()) return Fail(objects.status());
  (*objects)->set_direct_write_bytes(uint64_t{cluster->direct_write_kib} << 10);

  clf::server::GrpcPeers peers(*cluster, *cred);
  clf::server::MetaOps ops(*cluster, id, store->get(), objects->get(), &peers);
  clf::Status init = ops.Init();
  if (!init.ok()) return Fail(init);

  // Replicated files (docs/ARCHITECTURE.md "Replicated data"): the stores of
  // the copies held here, the replica state of the files whose metadata is
  // here, and the ordering and forwarding of their writes. Forwarded writes
  // travel on the other servers' data channels, authenticated as a server
  // (its certificate, or without TLS the servers' secret).
  clf::server::CopyStores copies(objects->get(),
                                 {uint64_t{cluster->early_writeback_kib} << 10,
                                  uint64_t{cluster->read_ahead_kib} << 10,
                                  uint64_t{cluster->direct_write_kib} << 10});
  std::unique_ptr<clf::server::Replication> replication;
  clf::server::ReplicaStateOps replica_state(
      *cluster, id, store->get(), &ops.locks(),
      [&peers, &replication, id](clf::ServerId to, clf::Handle h,
                                 std::function<void(clf::Status)> done) {
        if (to != id) return peers.ReplicasChanged(to, h, std::move(done));
        if (replication) replication->Changed(h);
        done(clf::Status::Ok());
      });
  clf::Result<clf::transport::DataChannelAuth> forward_auth =
      DataAuthOf(*cluster, *cred, auth.peer_secret, /*server=*/false);
  if (!forward_auth.ok()) {
    return Fail(forward_auth.status().WithContext("data channel TLS (forwarding)"));
  }
  replication = std::make_unique<clf::server::Replication>(
      *cluster, id, &copies,
      [&peers, &replica_state, id](clf::ServerId m, const clf::v1::ReplicasRequest& r) {
        return m == id ? replica_state.Serve(r) : peers.Replicas(m, r);
      },
      *forward_auth);
  if (fresh_store) replication->SetLostCopies();  // until every other server heard
  clf::server::Resyncer resyncer(replication.get());
  replication->set_on_changed([&resyncer](clf::Handle h) { resyncer.Enqueue(h); });
  ops.set_copies(&copies);
  ops.set_on_replicas_changed([&replica_state](clf::Handle h, const clf::v1::Layout& l) {
    replica_state.TellHolders(h, l);
  });
  if (cluster->metadata_mode == clf::MetadataMode::kClient) {
    // Client mode: object capabilities are signed with the servers' peer secret
    // (Validate requires peer_secret_file in this mode, also with [tls]).
    clf::Result<std::string> key = clf::ReadSecret(cluster->peer_secret_file);
    if (!key.ok()) return Fail(key.status().WithContext("capability key (peer_secret_file)"));
    ops.set_capability_key(*key);
  }

  clf::server::DataOps data_ops(objects->get(), store->get(), id);
  data_ops.set_replication(&copies, replication.get());
  clf::server::DataBytes data_bytes;  // clf_data_bytes_total: outlives the data server and services
  std::unique_ptr<clf::server::DataServer> data_server;
  if (cluster->transport != clf::TransportKind::kGrpc) {
    clf::Result<std::string> data_addr = clf::DataAddressOf(me);
    if (!data_addr.ok()) return Fail(data_addr.status());
    data_server = std::make_unique<clf::server::DataServer>(
        &data_ops, *data_addr, *data_auth, cluster->rpc_timeout_ms,
        clf::server::ReadScheduleOptions{id, cluster->sched_server_slots,
                                         cluster->sched_max_bypass});
    data_server->set_bytes(&data_bytes);
    data_server->set_on_request([&ops, &resyncer] {
      ops.NoteForeground();
      resyncer.NoteForeground();
    });
    clf::Status ds = data_server->Start();
    if (!ds.ok()) return Fail(ds.WithContext("TCP data channel"));
    CLF_LOG_INFO("data channel (tcp) listening on {} ({})", *data_addr,
                 !cred->tls                  ? "secret challenge"
                 : cluster->tls.encrypt_data ? "mutual TLS, encrypted"
                                             : "mutual TLS handshake, then plaintext bulk");
    // RDMA: forced by transport = rdma; with auto only when this host has a
    // hardware provider (a failure then leaves the TCP channel serving). It
    // authenticates with the client secret: not with [tls] (Validate refuses
    // rdma there; auto stays on tcp).
    const bool force = cluster->transport == clf::TransportKind::kRdma;
    if (!cred->tls && (force || (cluster->transport == clf::TransportKind::kAuto &&
                                 clf::transport::HardwareRdmaAvailable()))) {
      clf::Result<std::string> rdma_addr = clf::RdmaAddressOf(me);
      clf::Status rs = rdma_addr.status();
      if (rs.ok()) {
        rs = data_server->StartRdma(*rdma_addr, cluster->rdma_provider, data_auth->secret,
                                    cluster->rpc_timeout_ms);
      }
      if (rs.ok()) {
        CLF_LOG_INFO("data channel ({}) listening on {}", data_server->offers(), *rdma_addr);
      } else if (force) {
        data_server->Stop();
        return Fail(rs.WithContext("RDMA listener"));
      } else {
        CLF_LOG_WARN("RDMA listener not started ({}); serving data over tcp", rs.ToString());
      }
    }
  }

  // Sized from the cores: client-facing work may wait on other servers (a
  // collective, a peer call), so it gets a few threads per core; peer work is
  // local or a leaf call. A 2-core box runs 8 + 4, not 16 + 16.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  clf::Executor io("clfd-io", std::max(4u, 4 * cores));
  clf::Executor peer_ex("clfd-peer", std::max(4u, 2 * cores));
  // Unlinking removed files' data objects: one thread at nice 10, so it runs
  // in the time the foreground leaves (and still makes progress under load).
  clf::Executor reaper("clfd-reaper", 1);
  reaper.Submit([] {
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10) != 0) {
      CLF_LOG_WARN("reaper thread: setpriority: {}", std::strerror(errno));
    }
  });
  ops.set_reaper(&reaper);
  clf::server::ServiceContext ctx;
  ctx.ops = &ops;
  ctx.data = &data_ops;
  ctx.replica_state = &replica_state;
  ctx.replication = replication.get();
  ctx.resyncer = &resyncer;
  ctx.data_bytes = &data_bytes;
  if (data_server) {
    ctx.transport = data_server->offers();
    ctx.data_address = data_server->address();
    ctx.reads = &data_server->read_gate();
  }
  ctx.objects = objects->get();
  ctx.store = store->get();
  ctx.io = &io;
  ctx.peer = &peer_ex;
  ctx.auth = auth;
  ctx.address = me.address;
  ctx.id = id;
  ctx.started = std::chrono::steady_clock::now();
  // Locks are soft state: a restart starts a new epoch; holders of the previous
  // one reclaim their locks during the grace period (docs/locking.md).
  clf::server::LockOpsOptions lock_opts;
  lock_opts.state_file = me.data_dir + "/lock_state";
  lock_opts.grace_ms =
      cluster->lock_grace_ms != 0 ? cluster->lock_grace_ms : 2 * lock_opts.default_lease_ms;
  clf::server::LockOps locks(id, lock_opts);
  ctx.locks = &locks;
  std::unique_ptr<clf::server::DirLeases> leases;
  if (cluster->dir_lease_ms > 0) {
    leases = std::make_unique<clf::server::DirLeases>(cluster->dir_lease_ms);
    ctx.leases = leases.get();
  }

  clf::server::MetaService meta_svc(&ctx);
  clf::server::DataService data_svc(&ctx);
  clf::server::PeerService peer_svc(&ctx);
  clf::server::AdminService admin_svc(&ctx);
  clf::server::BaselineService baseline_svc(&ctx);
  clf::server::LockService lock_svc(&ctx, &locks);
  clf::server::metrics::Registry metrics;
  clf::server::metrics::RegisterServerGauges(&metrics, &ctx);
  grpc::EnableDefaultHealthCheckService(true);  // grpc.health.v1.Health; no secret needed
  grpc::ServerBuilder builder;
  builder.experimental().SetInterceptorCreators(clf::server::metrics::RpcInterceptors(&metrics));
  builder.AddListeningPort(me.address, clf::ServerCredentialsFor(*cred));
  builder.SetMaxReceiveMessageSize(clf::kMaxMessageBytes);
  builder.SetMaxSendMessageSize(clf::kMaxMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, clf::kHttp2FrameBytes);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, clf::kHttp2WindowBytes);
  builder.RegisterService(&meta_svc);
  builder.RegisterService(&data_svc);
  builder.RegisterService(&peer_svc);
  builder.RegisterService(&admin_svc);
  builder.RegisterService(&baseline_svc);
  builder.RegisterService(&lock_svc);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return Fail(clf::Unavailable("cannot listen on " + me.address));
  CLF_LOG_INFO("server {} listening on {} ({}; data in {})", id, me.address,
               cred->tls ? "mutual TLS" : "secrets, no TLS", me.data_dir);
  std::unique_ptr<clf::server::metrics::HttpExporter> exporter;
  if (!me.metrics_address.empty()) {
    auto e = clf::server::metrics::HttpExporter::Start(me.metrics_address, &metrics);
    if (!e.ok()) {
      server->Shutdown();
      return Fail(e.status());
    }
    exporter = std::move(*e);
    CLF_LOG_INFO("metrics on http://{}/metrics", me.metrics_address);
  }

  if (!pid_file.empty()) {
    std::string tmp = pid_file + ".tmp";
    std::ofstream(tmp) << getpid() << "\n";
    std::filesystem::rename(tmp, pid_file);
  }

  // Background: frees data objects of removed files by batched collectives.
  std::thread gc([&ops] { ops.RunGc(); });
  // Background: cross-server renames whose destination did not answer, and
  // replaced files' link drops not yet applied (replayed from RocksDB at start).
  std::thread intents([&ops] { ops.RunRenameIntents(); });
  // Background: files here with stale copies are announced to the servers
  // that resync them.
  std::thread nudges([&replica_state] { replica_state.RunNudges(); });
  // Every other server hears whether this server's store is new (with a new
  // store after an earlier one, it records this server's copies of its
  // replicated files stale); each call waits for a server not up yet, and is
  // repeated until each has answered.
  std::atomic<bool> stopping{false};
  std::thread announce([&] {
    std::vector<bool> told(cluster->size(), false);
    told[id] = true;
    for (;;) {
      bool all = true;
      for (clf::ServerId s = 0; s < cluster->size(); ++s) {
        if (told[s] || stopping) continue;
        clf::v1::AnnounceStoreRequest r;
        r.set_server(id);
        r.set_fresh(fresh_store);
        clf::Result<clf::v1::AnnounceStoreReply> rep = peers.AnnounceStore(s, r);
        if (rep.ok()) {
          told[s] = true;
          replication->LostToldTo(s);
        } else {
          all = false;
        }
      }
      if (all || stopping) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  int sig = 0;
  sigwait(&sigs, &sig);
  CLF_LOG_INFO("signal {}: stopping", sig);
  server->GetHealthCheckService()->Shutdown();  // NOT_SERVING while draining
  exporter.reset();
  ops.StopGc();
  gc.join();
  ops.StopRenameIntents();
  intents.join();
  replica_state.StopNudges();
  nudges.join();
  stopping = true;
  peers.CancelAnnouncements();
  announce.join();
  if (data_server) data_server->Stop();
  if (leases) leases->Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(3));
  io.Shutdown();
  peer_ex.Shutdown();
  reaper.Shutdown();
  store->reset();
  if (!pid_file.empty()) std::filesystem::remove(pid_file);
  CLF_LOG_INFO("stopped");
  spdlog::default_logger()->flush();
  return 0;
}
