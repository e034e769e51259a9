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
#include <initializer_list>
#include <memory>
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

// What `clfd` was started with.
struct Options {
  std::string cluster_file, log_file, pid_file, log_level = "info";
  uint32_t id = 0;
};

// One server's parts, started in order by the steps below and stopped in
// reverse by Stop. The members are declared in the order they start, so a
// step that fails leaves the destructor to take down what had started.
class Clfd {
 public:
  explicit Clfd(Options o) : o_(std::move(o)) {}

  // The cluster file, this server's credential, who may call what, and how
  // the data channels authenticate.
  clf::Status LoadConfig();
  // RocksDB, the object store, and the namespace (MetaOps) over them.
  clf::Status OpenStores();
  // Replicated files (docs/ARCHITECTURE.md "Replicated data"): the stores of
  // the copies held here, the replica state of the files whose metadata is
  // here, and the ordering and forwarding of their writes.
  clf::Status StartReplication();
  // The data operations and the TCP data channel (and RDMA where it runs).
  clf::Status StartDataChannel();
  // Executors, locks, leases, the gRPC services and the metrics exporter;
  // then the pid file says the server is up.
  clf::Status StartServices();
  // Threads: garbage collection, rename intents, stale-copy nudges, and the
  // announcement of this server's store to the others.
  void StartBackground();
  // After a signal: everything stops, in reverse.
  void Stop();

 private:
  clf::Status StartRdma();
  void AnnounceStore();
  // StartServices' steps, in order.
  void StartExecutors();
  void FillContext();
  void StartLocksAndLeases();
  clf::Status StartGrpc();
  clf::Status StartExporter();
  void WritePidFile() const;

  const Options o_;
  clf::ClusterConfig cluster_;
  const clf::ServerConfig* me_ = nullptr;
  clf::Credentials cred_;
  clf::server::AuthConfig auth_;
  clf::transport::DataChannelAuth data_auth_;
  std::unique_ptr<clf::server::RocksMetaStore> store_;
  bool fresh_store_ = false;
  std::unique_ptr<clf::server::ObjectStore> objects_;
  std::unique_ptr<clf::server::GrpcPeers> peers_;
  std::unique_ptr<clf::server::MetaOps> ops_;
  std::unique_ptr<clf::server::ClientModeOps> client_mode_;
  std::unique_ptr<clf::server::CopyStores> copies_;
  std::unique_ptr<clf::server::WriteIntents> write_intents_;
  std::unique_ptr<clf::server::Replication> replication_;
  std::unique_ptr<clf::server::ReplicaStateOps> replica_state_;
  std::unique_ptr<clf::server::Resyncer> resyncer_;
  std::unique_ptr<clf::server::DataOps> data_ops_;
  clf::server::DataBytes data_bytes_;  // clf_data_bytes_total: outlives the data server and services
  std::unique_ptr<clf::server::DataServer> data_server_;
  std::unique_ptr<clf::Executor> io_, peer_ex_, reaper_;
  clf::server::ServiceContext ctx_;
  std::unique_ptr<clf::server::LockOps> locks_;
  std::unique_ptr<clf::server::DirLeases> leases_;
  std::unique_ptr<clf::server::MetaService> meta_svc_;
  std::unique_ptr<clf::server::DataService> data_svc_;
  std::unique_ptr<clf::server::PeerService> peer_svc_;
  std::unique_ptr<clf::server::AdminService> admin_svc_;
  std::unique_ptr<clf::server::BaselineService> baseline_svc_;
  std::unique_ptr<clf::server::LockService> lock_svc_;
  clf::server::metrics::Registry metrics_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<clf::server::metrics::HttpExporter> exporter_;
  std::thread gc_, intents_, nudges_, announce_, settle_;
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
};

clf::Status Clfd::LoadConfig() {
  CLF_ASSIGN_OR_RETURN(cluster_, clf::LoadClusterConfig(o_.cluster_file));
  if (o_.id >= cluster_.size()) {
    return clf::Invalid("--id " + std::to_string(o_.id) + " is not in the cluster file");
  }
  me_ = &cluster_.servers[o_.id];
  // Our own credential (certificate or peer secret) and what callers must present.
  CLF_ASSIGN_OR_RETURN(cred_, clf::LoadServerCredentials(cluster_, o_.id));
  auth_.tls = cred_.tls;
  if (!cred_.tls) {
    CLF_ASSIGN_OR_RETURN(auth_.client_secret, clf::ReadSecret(cluster_.secret_file));
    auth_.peer_secret = cred_.secret;
    if (auth_.client_secret == auth_.peer_secret) {
      return clf::Invalid("the peer secret equals the client secret: clients could act as servers");
    }
  }
  clf::Result<clf::transport::DataChannelAuth> data_auth =
      DataAuthOf(cluster_, cred_, auth_.client_secret, /*server=*/true);
  if (!data_auth.ok()) return data_auth.status().WithContext("data channel TLS");
  data_auth_ = std::move(*data_auth);
  // Without TLS a connection proving the servers' secret is a server's (the
  // only ones whose forwarded copies' writes are taken).
  if (!cred_.tls) data_auth_.server_secret = auth_.peer_secret;
  return clf::Status::Ok();
}

clf::Status Clfd::OpenStores() {
  const clf::ServerConfig& me = *me_;
  std::error_code mk_ec;
  std::filesystem::create_directories(me.data_dir, mk_ec);
  if (mk_ec) return clf::IoError("create data dir " + me.data_dir + ": " + mk_ec.message());
  CLF_ASSIGN_OR_RETURN(store_,
                       clf::server::RocksMetaStore::Open(me.data_dir + "/meta", cluster_.sync_metadata));
  // A store made now (a new server, or one whose disk was lost): its copies
  // of replicated files are not there (Replication::SetLostCopies).
  fresh_store_ = !std::filesystem::exists(me.data_dir + "/objects");
  CLF_ASSIGN_OR_RETURN(objects_, clf::server::ObjectStore::Open(
                                     me.data_dir + "/objects",
                                     uint64_t{cluster_.early_writeback_kib} << 10,
                                     uint64_t{cluster_.read_ahead_kib} << 10));
  objects_->set_direct_write_bytes(uint64_t{cluster_.direct_write_kib} << 10);
  peers_ = std::make_unique<clf::server::GrpcPeers>(cluster_, cred_);
  ops_ = std::make_unique<clf::server::MetaOps>(cluster_, o_.id, store_.get(), objects_.get(),
                                                peers_.get());
  client_mode_ = std::make_unique<clf::server::ClientModeOps>(cluster_, ops_.get(), objects_.get());
  return ops_->Init();
}

clf::Status Clfd::StartReplication() {
  // Forwarded writes travel on the other servers' data channels,
  // authenticated as a server (its certificate, or without TLS the servers'
  // secret).
  copies_ = std::make_unique<clf::server::CopyStores>(
      objects_.get(), clf::server::CopyStores::Settings{uint64_t{cluster_.early_writeback_kib} << 10,
                                                      uint64_t{cluster_.read_ahead_kib} << 10,
                                                      uint64_t{cluster_.direct_write_kib} << 10});
  // The copies' stores of a replicated cluster are opened now: opening one
  // fills its pool of object files, which is better not done beside the
  // first writes.
  for (uint32_t slot = 1; slot < cluster_.default_layout.replicas; ++slot) {
    CLF_RETURN_IF_ERROR(copies_->For(slot).status());
  }
  const clf::ServerId id = o_.id;
  replica_state_ = std::make_unique<clf::server::ReplicaStateOps>(
      cluster_, id, store_.get(), &ops_->locks(),
      [this, id](clf::ServerId to, clf::Handle h, std::function<void(clf::Status)> done) {
        if (to != id) return peers_->ReplicasChanged(to, h, std::move(done));
        if (replication_) replication_->Changed(h);
        done(clf::Status::Ok());
      });
  clf::Result<clf::transport::DataChannelAuth> forward_auth =
      DataAuthOf(cluster_, cred_, auth_.peer_secret, /*server=*/false);
  if (!forward_auth.ok()) return forward_auth.status().WithContext("data channel TLS (forwarding)");
  replication_ = std::make_unique<clf::server::Replication>(
      cluster_, id, copies_.get(),
      [this, id](clf::ServerId m, const clf::v1::ReplicasRequest& r) {
        return m == id ? replica_state_->Serve(r) : peers_->Replicas(m, r);
      },
      *forward_auth);
  if (fresh_store_) replication_->SetLostCopies();  // until every other server heard
  // Copies written here are recorded before each write, so that after a
  // power loss they are recorded stale instead of serving what the disk kept.
  write_intents_ = std::make_unique<clf::server::WriteIntents>(store_.get(), copies_.get());
  replication_->SetWriteIntents(write_intents_.get());
  resyncer_ = std::make_unique<clf::server::Resyncer>(replication_.get());
  replication_->set_on_changed([this](clf::Handle h) { resyncer_->Enqueue(h); });
  ops_->set_copies(copies_.get(), write_intents_.get());
  ops_->set_on_replicas_changed([this](clf::Handle h, const clf::v1::Layout& l) {
    replica_state_->TellHolders(h, l);
  });
  if (cluster_.metadata_mode == clf::MetadataMode::kClient) {
    // Client mode: object capabilities are signed with the servers' peer secret
    // (Validate requires peer_secret_file in this mode, also with [tls]).
    clf::Result<std::string> key = clf::ReadSecret(cluster_.peer_secret_file);
    if (!key.ok()) return key.status().WithContext("capability key (peer_secret_file)");
    client_mode_->set_capability_key(*key);
  }
  return clf::Status::Ok();
}

clf::Status Clfd::StartDataChannel() {
  data_ops_ = std::make_unique<clf::server::DataOps>(objects_.get(), store_.get(), o_.id);
  data_ops_->set_replication(copies_.get(), replication_.get());
  if (cluster_.transport == clf::TransportKind::kGrpc) return clf::Status::Ok();
  CLF_ASSIGN_OR_RETURN(std::string data_addr, clf::DataAddressOf(*me_));
  data_server_ = std::make_unique<clf::server::DataServer>(
      data_ops_.get(), data_addr, data_auth_, cluster_.rpc_timeout_ms,
      clf::server::ReadScheduleOptions{o_.id, cluster_.sched_server_slots,
                                       cluster_.sched_max_bypass});
  data_server_->set_bytes(&data_bytes_);
  data_server_->set_on_request([this] {
    ops_->NoteForeground();
    resyncer_->NoteForeground();
  });
  clf::Status ds = data_server_->Start();
  if (!ds.ok()) return ds.WithContext("TCP data channel");
  CLF_LOG_INFO("data channel (tcp) listening on {} ({})", data_addr,
               !cred_.tls                  ? "secret challenge"
               : cluster_.tls.encrypt_data ? "mutual TLS, encrypted"
                                           : "mutual TLS handshake, then plaintext bulk");
  return StartRdma();
}

// RDMA: forced by transport = rdma; with auto only when this host has a
// hardware provider (a failure then leaves the TCP channel serving). It
// authenticates with the client secret: not with [tls] (Validate refuses
// rdma there; auto stays on tcp).
clf::Status Clfd::StartRdma() {
  const bool force = cluster_.transport == clf::TransportKind::kRdma;
  if (cred_.tls || !(force || (cluster_.transport == clf::TransportKind::kAuto &&
                               clf::transport::HardwareRdmaAvailable()))) {
    return clf::Status::Ok();
  }
  clf::Result<std::string> rdma_addr = clf::RdmaAddressOf(*me_);
  clf::Status rs = rdma_addr.status();
  if (rs.ok()) {
    rs = data_server_->StartRdma(*rdma_addr, cluster_.rdma_provider, data_auth_.secret,
                                 cluster_.rpc_timeout_ms);
  }
  if (rs.ok()) {
    CLF_LOG_INFO("data channel ({}) listening on {}", data_server_->offers(), *rdma_addr);
  } else if (force) {
    data_server_->Stop();
    return rs.WithContext("RDMA listener");
  } else {
    CLF_LOG_WARN("RDMA listener not started ({}); serving data over tcp", rs.ToString());
  }
  return clf::Status::Ok();
}

clf::Status Clfd::StartServices() {
  StartExecutors();
  FillContext();
  StartLocksAndLeases();
  CLF_RETURN_IF_ERROR(StartGrpc());
  CLF_RETURN_IF_ERROR(StartExporter());
  WritePidFile();
  return clf::Status::Ok();
}

void Clfd::StartExecutors() {
  // Sized from the cores: client-facing work may wait on other servers (a
  // collective, a peer call), so it gets a few threads per core; peer work is
  // local or a leaf call. A 2-core box runs 8 + 4, not 16 + 16.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  io_ = std::make_unique<clf::Executor>("clfd-io", std::max(4u, 4 * cores));
  peer_ex_ = std::make_unique<clf::Executor>("clfd-peer", std::max(4u, 2 * cores));
  // Unlinking removed files' data objects: one thread at nice 10, so it runs
  // in the time the foreground leaves (and still makes progress under load).
  reaper_ = std::make_unique<clf::Executor>("clfd-reaper", 1);
  reaper_->Submit([] {
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10) != 0) {
      CLF_LOG_WARN("reaper thread: setpriority: {}", std::strerror(errno));
    }
  });
  ops_->set_reaper(reaper_.get());
}

// What the services reach through ctx_ (the locks and leases: StartLocksAndLeases).
void Clfd::FillContext() {
  ctx_.ops = ops_.get();
  ctx_.client_mode = client_mode_.get();
  ctx_.data = data_ops_.get();
  ctx_.replica_state = replica_state_.get();
  ctx_.replication = replication_.get();
  ctx_.resyncer = resyncer_.get();
  ctx_.data_bytes = &data_bytes_;
  if (data_server_) {
    ctx_.transport = data_server_->offers();
    ctx_.data_address = data_server_->address();
    ctx_.reads = &data_server_->read_gate();
  }
  ctx_.objects = objects_.get();
  ctx_.store = store_.get();
  ctx_.io = io_.get();
  ctx_.peer = peer_ex_.get();
  ctx_.auth = auth_;
  ctx_.address = me_->address;
  ctx_.id = o_.id;
  ctx_.started = std::chrono::steady_clock::now();
}

void Clfd::StartLocksAndLeases() {
  // Locks are soft state: a restart starts a new epoch; holders of the previous
  // one reclaim their locks during the grace period (docs/locking.md).
  clf::server::LockOpsOptions lock_opts;
  lock_opts.state_file = me_->data_dir + "/lock_state";
  lock_opts.grace_ms =
      cluster_.lock_grace_ms != 0 ? cluster_.lock_grace_ms : 2 * lock_opts.default_lease_ms;
  locks_ = std::make_unique<clf::server::LockOps>(o_.id, lock_opts);
  ctx_.locks = locks_.get();
  if (cluster_.dir_lease_ms > 0) {
    leases_ = std::make_unique<clf::server::DirLeases>(cluster_.dir_lease_ms);
    ctx_.leases = leases_.get();
  }
}

// The gRPC services over ctx_, their metrics, and the listening server.
clf::Status Clfd::StartGrpc() {
  const clf::ServerConfig& me = *me_;
  meta_svc_ = std::make_unique<clf::server::MetaService>(&ctx_);
  data_svc_ = std::make_unique<clf::server::DataService>(&ctx_);
  peer_svc_ = std::make_unique<clf::server::PeerService>(&ctx_);
  admin_svc_ = std::make_unique<clf::server::AdminService>(&ctx_);
  baseline_svc_ = std::make_unique<clf::server::BaselineService>(&ctx_);
  lock_svc_ = std::make_unique<clf::server::LockService>(&ctx_, locks_.get());
  clf::server::metrics::RegisterServerGauges(&metrics_, &ctx_);
  grpc::EnableDefaultHealthCheckService(true);  // grpc.health.v1.Health; no secret needed
  grpc::ServerBuilder builder;
  builder.experimental().SetInterceptorCreators(clf::server::metrics::RpcInterceptors(&metrics_));
  builder.AddListeningPort(me.address, clf::ServerCredentialsFor(cred_));
  builder.SetMaxReceiveMessageSize(clf::kMaxMessageBytes);
  builder.SetMaxSendMessageSize(clf::kMaxMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, clf::kHttp2FrameBytes);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, clf::kHttp2WindowBytes);
  for (grpc::Service* s : std::initializer_list<grpc::Service*>{
           meta_svc_.get(), data_svc_.get(), peer_svc_.get(), admin_svc_.get(),
           baseline_svc_.get(), lock_svc_.get()}) {
    builder.RegisterService(s);
  }
  server_ = builder.BuildAndStart();
  if (!server_) return clf::Unavailable("cannot listen on " + me.address);
  CLF_LOG_INFO("server {} listening on {} ({}; data in {})", o_.id, me.address,
               cred_.tls ? "mutual TLS" : "secrets, no TLS", me.data_dir);
  return clf::Status::Ok();
}

// The Prometheus endpoint, if the server has a metrics_address.
clf::Status Clfd::StartExporter() {
  const clf::ServerConfig& me = *me_;
  if (me.metrics_address.empty()) return clf::Status::Ok();
  auto e = clf::server::metrics::HttpExporter::Start(me.metrics_address, &metrics_);
  if (!e.ok()) {
    server_->Shutdown();
    return e.status();
  }
  exporter_ = std::move(*e);
  CLF_LOG_INFO("metrics on http://{}/metrics", me.metrics_address);
  return clf::Status::Ok();
}

// Written last: its appearance says the server is up.
void Clfd::WritePidFile() const {
  if (o_.pid_file.empty()) return;
  std::string tmp = o_.pid_file + ".tmp";
  std::ofstream(tmp) << getpid() << "\n";
  std::filesystem::rename(tmp, o_.pid_file);
}

void Clfd::StartBackground() {
  // Frees data objects of removed files by batched collectives.
  gc_ = std::thread([this] { ops_->RunGc(); });
  // Cross-server renames whose destination did not answer, and replaced
  // files' link drops not yet applied (replayed from RocksDB at start).
  intents_ = std::thread([this] { ops_->RunRenameIntents(); });
  // Files here with stale copies are announced to the servers that resync them.
  nudges_ = std::thread([this] { replica_state_->RunNudges(); });
  announce_ = std::thread([this] { AnnounceStore(); });
  // Copies that were being written when this server last stopped uncleanly
  // are recorded stale on their metadata servers (retried while one is down).
  settle_ = std::thread([this] {
    while (!stopping_ && !replication_->SettleUnsynced()) {
      std::unique_lock<std::mutex> l(stop_mu_);
      stop_cv_.wait_for(l, std::chrono::milliseconds(500), [this] { return stopping_.load(); });
    }
  });
}

// Every other server hears whether this server's store is new (with a new
// store after an earlier one, it records this server's copies of its
// replicated files stale); each call waits for a server not up yet, and is
// repeated until each has answered.
void Clfd::AnnounceStore() {
  std::vector<bool> told(cluster_.size(), false);
  told[o_.id] = true;
  for (;;) {
    bool all = true;
    for (clf::ServerId s = 0; s < cluster_.size(); ++s) {
      if (told[s] || stopping_) continue;
      clf::v1::AnnounceStoreRequest r;
      r.set_server(o_.id);
      r.set_fresh(fresh_store_);
      clf::Result<clf::v1::AnnounceStoreReply> rep = peers_->AnnounceStore(s, r);
      if (rep.ok()) {
        told[s] = true;
        replication_->LostToldTo(s);
      } else {
        all = false;
      }
    }
    if (all || stopping_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void Clfd::Stop() {
  server_->GetHealthCheckService()->Shutdown();  // NOT_SERVING while draining
  exporter_.reset();
  ops_->StopGc();
  gc_.join();
  ops_->StopRenameIntents();
  intents_.join();
  replica_state_->StopNudges();
  nudges_.join();
  {
    std::lock_guard<std::mutex> l(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  peers_->CancelAnnouncements();
  announce_.join();
  settle_.join();
  if (data_server_) data_server_->Stop();
  if (leases_) leases_->Stop();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(3));
  io_->Shutdown();
  peer_ex_->Shutdown();
  reaper_->Shutdown();
  // No write reaches a copy any more: sync them and drop their records.
  write_intents_->Close();
  store_.reset();
  if (!o_.pid_file.empty()) std::filesystem::remove(o_.pid_file);
}

}  // namespace

int main(int argc, char** argv) {
  clf::TuneMalloc();
  CLI::App app{"clfd: Clusterfile server"};
  app.set_version_flag("--version", std::string("clfd ") + clf::kVersion);
  Options o;
  app.add_option("--cluster", o.cluster_file, "cluster file (TOML)")->required();
  app.add_option("--id", o.id, "this server's id in the cluster file")->required();
  app.add_option("--log-file", o.log_file, "log here instead of stderr");
  app.add_option("--pid-file", o.pid_file, "write the pid here once listening");
  app.add_option("--log-level", o.log_level, "trace|debug|info|warn|error");
  CLI11_PARSE(app, argc, argv);

  // Signals are taken by sigwait in main; every thread created later inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  clf::log::Init("clfd" + std::to_string(o.id), o.log_level, o.log_file);
  Clfd d(o);
  for (auto step : {&Clfd::LoadConfig, &Clfd::OpenStores, &Clfd::StartReplication,
                    &Clfd::StartDataChannel, &Clfd::StartServices}) {
    if (clf::Status s = (d.*step)(); !s.ok()) return Fail(s);
  }
  d.StartBackground();

  int sig = 0;
  sigwait(&sigs, &sig);
  CLF_LOG_INFO("signal {}: stopping", sig);
  d.Stop();
  CLF_LOG_INFO("stopped");
  spdlog::default_logger()->flush();
  return 0;
}
