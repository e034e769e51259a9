// libclf over gRPC: one channel per server, callbacks on gRPC's threads.
#include "clf/client.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <optional>
#include <unordered_map>

#include "clf/v1/admin.grpc.pb.h"
#include "clf/v1/data.grpc.pb.h"
#include "clf/v1/meta.grpc.pb.h"
#include "baseline_path.h"
#include "common/credentials.h"
#include "common/executor.h"
#include "common/log.h"
#include "common/status_grpc.h"
#include "common/tsan.h"

#include "client/list_io.h"
#include "common/transport/grpc_transport.h"
#include "common/transport/rdma_transport.h"
#include "common/transport/tcp_transport.h"
#include "scheduler/data_plan.h"

namespace clf::client {

// The public selectors are the wire's SetAttrBit values (meta.proto).
namespace {
constexpr bool SameBit(SetAttrMask a, v1::SetAttrBit b) {
  return static_cast<uint32_t>(a) == static_cast<uint32_t>(b);
}
}  // namespace
static_assert(SameBit(kSetMode, v1::SETATTR_MODE) && SameBit(kSetUid, v1::SETATTR_UID) &&
              SameBit(kSetGid, v1::SETATTR_GID) && SameBit(kSetSize, v1::SETATTR_SIZE) &&
              SameBit(kSetAtime, v1::SETATTR_ATIME) && SameBit(kSetMtime, v1::SETATTR_MTIME) &&
              SameBit(kSetAtimeNow, v1::SETATTR_ATIME_NOW) &&
              SameBit(kSetMtimeNow, v1::SETATTR_MTIME_NOW) &&
              SameBit(kSetLayout, v1::SETATTR_LAYOUT) &&
              SameBit(kSetViaOpenFile, v1::SETATTR_VIA_OPEN_FILE) &&
              SameBit(kKillSuidGid, v1::SETATTR_KILL_SUIDGID) &&
              SameBit(kKillCaps, v1::SETATTR_KILL_CAPS) &&
              SameBit(kChownNothing, v1::SETATTR_CHOWN_NOTHING));
namespace {

// A rank for a client that was given none: a hash of host name and pid, so
// clients of different processes start their hash-IOS rotation at different servers.
uint32_t DefaultRank() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  uint64_t x =
      std::hash<std::string>()(std::string(host)) ^ (uint64_t(::getpid()) * 0x9e3779b97f4a7c15ULL);
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 32;
  return static_cast<uint32_t>(x & 0xFFFFFF);
}

Timespec FromProto(const v1::Timespec& t) { return Timespec{t.sec(), t.nsec()}; }
v1::Timespec ToProto(const Timespec& t) {
  v1::Timespec p;
  p.set_sec(t.sec);
  p.set_nsec(t.nsec);
  return p;
}

Attr FromProto(const v1::Attr& a) {
  Attr o;
  o.handle = a.handle();
  o.type = static_cast<FileType>(a.type());
  o.mode = a.mode();
  o.uid = a.uid();
  o.gid = a.gid();
  o.size = a.size();
  o.nlink = a.nlink();
  o.atime = FromProto(a.atime());
  o.mtime = FromProto(a.mtime());
  o.ctime = FromProto(a.ctime());
  o.rdev = a.rdev();
  o.blocks = a.blocks();
  o.layout = Layout{a.layout().stripe_size(), a.layout().stripe_count(), a.layout().first_server(),
                    a.layout().replicas(),    a.layout().sched_policy(), a.layout().sched_block()};
  o.has_xattrs = a.has_xattrs();
  o.writers = a.writers();
  return o;
}

void ToProto(const Caller& c, v1::Caller* p) {
  p->set_uid(c.uid);
  p->set_gid(c.gid);
  for (uint32_t g : c.groups) p->add_groups(g);
}

// Calls in flight: the destructor of a client waits until gRPC released them
// all (destroying a channel while the callback API still finishes a call on
// it has aborted inside gRPC: "ref_counted.h: prior > 0").
class CallCount {
 public:
  void Add() {
    std::lock_guard<std::mutex> l(mu_);
    ++n_;
  }
  void Done() {
    std::lock_guard<std::mutex> l(mu_);
    if (--n_ == 0) cv_.notify_all();
  }
  // False if calls were still live after `timeout`.
  bool WaitIdle(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [this] { return n_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t n_ = 0;
};

template <typename Req, typename Resp>
struct CallState {
  // Counts the call in `live` until gRPC has dropped it entirely (the client's
  // destructor waits for that, so no call outlives its channel).
  explicit CallState(std::shared_ptr<CallCount> live) : live_(std::move(live)) { live_->Add(); }
  ~CallState() { live_->Done(); }
  grpc::ClientContext ctx;
  Req req;
  Resp resp;

 private:
  std::shared_ptr<CallCount> live_;
};

class GrpcClient final : public Client {
 public:
  ~GrpcClient() override {
    // Every call has a deadline (a lease poll: its wait on top), so this ends.
    if (!live_->WaitIdle(std::chrono::milliseconds(timeout_ms_ + 11000))) {
      CLF_LOG_WARN("client closed with calls still in flight");
    }
  }

  GrpcClient(ClusterConfig cluster, Credentials cred, SslCtxPtr data_tls, ClientOptions opts,
             TransportKind transport)
      : cluster_(std::move(cluster)), cred_(std::move(cred)), transport_(transport) {
    timeout_ms_ = opts.rpc_timeout_ms ? opts.rpc_timeout_ms : cluster_.rpc_timeout_ms;
    {
      std::random_device rd;
      while (session_ == 0) session_ = (uint64_t{rd()} << 32) ^ rd();
      session_str_ = std::to_string(session_);
    }
    sched_ = cluster_.sched;
    if (!opts.sched.empty())
      sched_.policy = ParseOrderPolicy(opts.sched).value();  // checked by Open
    if (opts.sched_block != 0) sched_.block = opts.sched_block;
    if (opts.sched_window != 0) sched_.window = opts.sched_window;
    rank_ =
        opts.sched_rank >= 0 ? static_cast<uint32_t>(opts.sched_rank & 0xFFFFFF) : DefaultRank();
    dir_cache_ms_ = opts.dir_attr_cache_ms;
    HoldCallbackQueue();
    grpc::ChannelArguments args = ClfChannelArgs();
    std::shared_ptr<grpc::ChannelCredentials> creds = ChannelCredentialsFor(cred_);
    transport::DataChannelAuth data_auth;
    data_auth.secret = cred_.secret;
    data_auth.tls = std::move(data_tls);
    std::vector<std::shared_ptr<grpc::Channel>> meta_channels;
    for (const ServerConfig& s : cluster_.servers) {
      Stubs st;
      // Metadata and data on separate channels, so bulk transfers do not queue small calls.
      auto mch = grpc::CreateCustomChannel(s.address, creds, args);
      meta_channels.push_back(mch);
      grpc::ChannelArguments dargs = args;
      dargs.SetString("clf.channel", "data");  // distinct args: a distinct connection
      auto dch = grpc::CreateCustomChannel(s.address, creds, dargs);
      st.meta = v1::Meta::NewStub(mch);
      st.admin = v1::Admin::NewStub(mch);
      stubs_.push_back(std::move(st));
      auto path = std::make_unique<DataPath>();
      path->grpc = std::make_unique<transport::GrpcTransport>(dch, cred_.secret, timeout_ms_);
      if (!cred_.tls && (transport_ == TransportKind::kRdma ||
                         (transport_ == TransportKind::kAuto && transport::HardwareRdmaAvailable()))) {
        Result<std::string> raddr = RdmaAddressOf(s);
        if (raddr.ok()) {
          path->rdma = std::make_unique<transport::RdmaTransport>(
              *raddr, cluster_.rdma_provider, cred_.secret, timeout_ms_, kConnectionsPerServer);
        }
      }
      if (transport_ != TransportKind::kGrpc) {
        Result<std::string> addr = DataAddressOf(s);
        if (addr.ok()) {
          path->tcp = std::make_unique<transport::TcpTransport>(*addr, data_auth, timeout_ms_,
                                                                kConnectionsPerServer);
        } else {
          path->no_tcp = addr.status();
        }
      }
      paths_.push_back(std::move(path));
    }
    StartBaseline(meta_channels);
  }

  // metadata_mode = "client": files are created, removed and stat'ed by this
  // client on every data server itself (baseline_path.h).
  void StartBaseline(const std::vector<std::shared_ptr<grpc::Channel>>& meta_channels) {
    if (cluster_.metadata_mode != MetadataMode::kClient) return;
    baseline_ = std::make_unique<BaselinePath>(cluster_, meta_channels,
                                               [this](grpc::ClientContext* ctx) { Prepare(ctx); });
  }

  std::string DataTransportOf(ServerId s) override {
    if (s >= paths_.size()) return "";
    DataPath& p = *paths_[s];
    std::lock_guard<std::mutex> l(p.mu);
    if (p.chosen == TransportKind::kRdma) return "rdma(" + p.rdma->provider() + ")";
    return p.chosen == TransportKind::kAuto ? "" : std::string(TransportName(p.chosen));
  }

  const ClusterConfig& cluster() const override { return cluster_; }

  // ---- helpers
  void Prepare(grpc::ClientContext* ctx, uint32_t timeout_ms = 0) const {
    AddCallCredentials(ctx, cred_);
    ctx->AddMetadata(kSessionHeader, session_str_);
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(timeout_ms ? timeout_ms : timeout_ms_));
  }

  Status Route(Handle h, ServerId* s) const {
    *s = ServerOf(h);
    if (h == 0 || *s >= cluster_.size()) return Status(Code::kStale, "handle names no server of this cluster");
    return Status::Ok();
  }

  template <typename Req, typename Resp, typename Invoke>
  void Unary(Invoke invoke, Req req, std::function<void(Status, Resp&)> done,
             uint32_t timeout_ms = 0) {
    auto c = std::make_shared<CallState<Req, Resp>>(live_);
    c->req = std::move(req);
    Prepare(&c->ctx, timeout_ms);
    // Every CLF_META_CALL and every other Unary call starts and completes
    // here: the hand-off to gRPC's completion thread (common/tsan.h).
    invoke(&c->ctx, &c->req, &c->resp,
           tsan::Handoff(c.get(), [c, done = std::move(done)](grpc::Status s) {
             done(FromGrpc(s), c->resp);
           }));
  }

#define CLF_META_CALL(server, Method, ReqT, RespT, req, done)                                 \
  Unary<ReqT, RespT>(                                                                         \
      [stub = stubs_[server].meta.get()](grpc::ClientContext* ctx, ReqT* rq, RespT* rs,       \
                                         std::function<void(grpc::Status)> cb) {              \
        stub->async()->Method(ctx, rq, rs, std::move(cb));                                    \
      },                                                                                      \
      std::move(req), std::function<void(Status, RespT&)>(done))

  // ---- directory attribute cache (opt-in, bounded staleness)
  void CacheDir(const v1::Attr& a) {
    if (dir_cache_ms_ == 0 || a.handle() == 0 || a.type() != v1::FT_DIRECTORY) return;
    std::lock_guard<std::mutex> l(dir_mu_);
    if (dir_cache_.size() > 100000) dir_cache_.clear();
    dir_cache_[a.handle()] = {FromProto(a), std::chrono::steady_clock::now()};
  }
  void ForgetDir(Handle h) {
    if (dir_cache_ms_ == 0) return;
    std::lock_guard<std::mutex> l(dir_mu_);
    dir_cache_.erase(h);
  }
  bool CachedDir(Handle h, Attr* out) {
    if (dir_cache_ms_ == 0) return false;
    std::lock_guard<std::mutex> l(dir_mu_);
    auto it = dir_cache_.find(h);
    if (it == dir_cache_.end()) return false;
    if (std::chrono::steady_clock::now() - it->second.second >
        std::chrono::milliseconds(dir_cache_ms_)) {
      dir_cache_.erase(it);
      return false;
    }
    *out = it->second.first;
    return true;
  }

  std::function<void(Status, v1::AttrReply&)> AttrDone(Callback<Attr> cb) {
    return [this, cb = std::move(cb)](Status s, v1::AttrReply& r) {
      if (!s.ok()) return cb(s);
      if (r.has_parent()) CacheDir(r.parent());
      CacheDir(r.attr());
      Attr out = FromProto(r.attr());
      out.existed = r.existed();  // set by Create only
      cb(std::move(out));
    };
  }

  // ---- namespace
  void Lookup(Handle parent, std::string name, Caller caller, Callback<Attr> cb) override {
    ServerId s;
    if (Status st = Route(parent, &s); !st.ok()) return cb(st);
    if (Status st = ValidateName(name); !st.ok()) return cb(st);
    v1::LookupRequest r;
    r.set_parent(parent);
    r.set_name(std::move(name));
    ToProto(caller, r.mutable_caller());
    CLF_META_CALL(s, Lookup, v1::LookupRequest, v1::AttrReply, r, AttrDone(std::move(cb)));
  }

  void GetAttr(Handle h, Caller caller, Callback<Attr> cb) override {
    ServerId s;
    if (Status st = Route(h, &s); !st.ok()) return cb(st);
    Attr cached;
    if (CachedDir(h, &cached)) return cb(cached);
    v1::GetAttrRequest r;
    r.set_handle(h);
    ToProto(caller, r.mutable_caller());
    if (baseline_) return baseline_->GetAttr(s, std::move(r), AttrDone(std::move(cb)));
    CLF_META_CALL(s, GetAttr, v1::GetAttrRequest, v1::AttrReply, r, AttrDone(std::move(cb)));
  }

  void SetAttr(Handle h, SetAttrArgs a, Caller caller, Callback<Attr> cb) override {
    ServerId s;
    if (Status st = Route(h, &s); !st.ok()) return cb(st);
    v1::SetAttrRequest r;
    r.set_handle(h);
    ToProto(caller, r.mutable_caller());
    r.set_valid(a.valid);
    r.set_mode(a.mode);
    r.set_uid(a.uid);
    r.set_gid(a.gid);
    r.set_size(a.size);
    *r.mutable_atime() = ToProto(a.atime);
    *r.mutable_mtime() = ToProto(a.mtime);
    r.mutable_layout()->set_stripe_size(a.layout.stripe_size);
    r.mutable_layout()->set_stripe_count(a.layout.stripe_count);
    r.mutable_layout()->set_first_server(a.layout.first_server);
    r.mutable_layout()->set_replicas(a.layout.replicas);
    r.mutable_layout()->set_sched_policy(a.layout.sched_policy);
    r.mutable_layout()->set_sched_block(a.layout.sched_block);
    ForgetDir(h);
    CLF_META_CALL(s, SetAttr, v1::SetAttrRequest, v1::AttrReply, r, AttrDone(std::move(cb)));
  }

  void Create(Handle parent, std::string name, CreateArgs a, Caller caller,
              Callback<Attr> cb) override {
    ServerId s;
    if (Status st = Route(parent, &s); !st.ok()) return cb(st);
    if (Status st = ValidateName(name); !st.ok()) return cb(st);
    v1::CreateRequest r;
    r.set_parent(parent);
    r.set_name(std::move(name));
    ToProto(caller, r.mutable_caller());
    r.set_type(static_cast<v1::FileType>(a.type));
    r.set_mode(a.mode);
    r.set_rdev(a.rdev);
    r.set_symlink_target(std::move(a.symlink_target));
    r.set_exclusive(a.exclusive);
    r.set_open_for_write(a.open_for_write);
    if (baseline_ && a.type == FileType::kRegular) {
      return baseline_->Create(s, std::move(r), AttrDone(std::move(cb)));
    }
    CLF_META_CALL(s, Create, v1::CreateRequest, v1::AttrReply, r, AttrDone(std::move(cb)));
  }

  void ReportWrite(Handle h, ReportWriteArgs a, Caller caller, Callback<Attr> cb) override {
    ServerId s;
    if (Status st = Route(h, &s); !st.ok()) return cb(st);
    if (a.size > kMaxFileSize) return cb(Status(Code::kFileTooBig, "size past the maximum file size"));
    v1::ReportWriteRequest r;
    r.set_handle(h);
    ToProto(caller, r.mutable_caller());
    r.set_wrote(a.wrote);
    r.set_size(a.size);
    r.set_writers_delta(a.writers_delta);
    r.set_refresh(a.refresh);
    CLF_META_CALL(s, ReportWrite, v1::ReportWriteRequest, v1::AttrReply, r,
                  AttrDone(std::move(cb)));
  }

  void Link(Handle h, Handle new_parent, std::string new_name, Caller caller,
            Callback<Attr> cb) override {
    ServerId s;
    if (Status st = Route(new_parent, &s); !st.ok()) return cb(st);
    if (Status st = ValidateName(new_name); !st.ok()) return cb(st);
    v1::LinkRequest r;
    r.set_handle(h);
    r.set_new_parent(new_parent);
    r.set_new_name(std::move(new_name));
    ToProto(caller, r.mutable_caller());
    CLF_META_CALL(s, Link, v1::LinkRequest, v1::AttrReply, r, AttrDone(std::move(cb)));
  }

  void Remove(Handle parent, std::string name, bool directory, bool keep_orphan, Caller caller,
              Callback<RemoveResult> cb) override {
    ServerId s;
    if (Status st = Route(parent, &s); !st.ok()) return cb(st);
    if (Status st = ValidateName(name); !st.ok()) return cb(st);
    v1::RemoveRequest r;
    r.set_parent(parent);
    r.set_name(std::move(name));
    r.set_directory(directory);
    r.set_keep_orphan(keep_orphan);
    ToProto(caller, r.mutable_caller());
    ForgetDir(parent);
    auto done = [this, cb = std::move(cb), directory](Status st, v1::RemoveReply& rep) {
      if (!st.ok()) return cb(st);
      if (rep.has_parent()) CacheDir(rep.parent());
      if (directory) ForgetDir(rep.handle());
      cb(RemoveResult{rep.handle(), rep.orphaned()});
    };
    if (baseline_ && !directory) return baseline_->Remove(s, std::move(r), std::move(done));
    CLF_META_CALL(s, Remove, v1::RemoveRequest, v1::RemoveReply, r, std::move(done));
  }

  void Rename(Handle sp, std::string sn, Handle dp, std::string dn, uint32_t flags,
              bool keep_orphan, Caller caller, Callback<RemoveResult> cb) override {
    ServerId s, d;
    if (Status st = Route(sp, &s); !st.ok()) return cb(st);
    if (Status st = Route(dp, &d); !st.ok()) return cb(st);
    if (Status st = ValidateName(sn); !st.ok()) return cb(st);
    if (Status st = ValidateName(dn); !st.ok()) return cb(st);
    v1::RenameRequest r;
    r.set_src_parent(sp);
    r.set_src_name(std::move(sn));
    r.set_dst_parent(dp);
    r.set_dst_name(std::move(dn));
    r.set_flags(flags);
    r.set_keep_orphan(keep_orphan);
    ToProto(caller, r.mutable_caller());
    ForgetDir(sp);
    ForgetDir(dp);
    CLF_META_CALL(s, Rename, v1::RenameRequest, v1::RenameReply, r,
                  [cb = std::move(cb)](Status st, v1::RenameReply& rep) {
                    if (!st.ok()) return cb(st);
                    cb(RemoveResult{rep.replaced_handle(), rep.orphaned()});
                  });
  }

  void ReadDir(Handle dir, std::string after, uint32_t max_entries, bool plus, Caller caller,
               Callback<DirPage> cb) override {
    ServerId s;
    if (Status st = Route(dir, &s); !st.ok()) return cb(st);
    v1::ReadDirRequest r;
    r.set_handle(dir);
    r.set_after(std::move(after));
    r.set_max_entries(max_entries);
    r.set_plus(plus);
    ToProto(caller, r.mutable_caller());
    CLF_META_CALL(s, ReadDir, v1::ReadDirRequest, v1::ReadDirReply, r,
                  [cb = std::move(cb)](Status st, v1::ReadDirReply& rep) {
                    if (!st.ok()) return cb(st);
                    DirPage page;
                    page.eof = rep.eof();
                    page.parent = rep.parent();
                    page.entries.reserve(rep.entries_size());
                    for (v1::DirEntry& e : *rep.mutable_entries()) {
                      DirEntry d;
                      d.name = std::move(*e.mutable_name());
                      d.handle = e.handle();
                      d.type = static_cast<FileType>(e.type());
                      if (e.has_attr()) d.attr = FromProto(e.attr());
                      page.entries.push_back(std::move(d));
                    }
                    cb(std::move(page));
                  });
  }

  // ---- directory leases
  uint64_t session() const override { return session_; }

  void AcquireDirLease(Handle dir, uint32_t handles_wanted, bool with_attrs, Caller caller,
                       Callback<DirLeaseGrant> cb) override {
    ServerId s;
    if (Status st = Route(dir, &s); !st.ok()) return cb(st);
    v1::DirLeaseRequest r;
    r.set_dir(dir);
    r.set_op(v1::DirLeaseRequest::ACQUIRE);
    r.set_handles_wanted(handles_wanted);
    r.set_with_attrs(with_attrs);
    ToProto(caller, r.mutable_caller());
    CLF_META_CALL(s, DirLease, v1::DirLeaseRequest, v1::DirLeaseReply, r,
                  ([cb = std::move(cb)](Status st, v1::DirLeaseReply& rep) {
                    if (!st.ok()) return cb(st);
                    DirLeaseGrant g;
                    g.granted = rep.granted();
                    g.refused = rep.refused();
                    g.lease_ms = rep.lease_ms();
                    g.dir = FromProto(rep.dir());
                    g.with_attrs = rep.with_attrs();
                    g.entries.reserve(rep.entries_size());
                    for (v1::DirEntry& e : *rep.mutable_entries()) {
                      DirEntry d;
                      d.name = std::move(*e.mutable_name());
                      d.handle = e.handle();
                      d.type = static_cast<FileType>(e.type());
                      if (g.with_attrs && e.has_attr()) d.attr = FromProto(e.attr());
                      g.entries.push_back(std::move(d));
                    }
                    g.handle_first = rep.handle_first();
                    g.handle_count = rep.handle_count();
                    const v1::Layout& l = rep.file_layout();
                    g.file_layout = Layout{l.stripe_size(), l.stripe_count(), 0, l.replicas()};
                    cb(std::move(g));
                  }));
  }

  void ReleaseDirLease(Handle dir, StatusCallback cb) override {
    ServerId s;
    if (Status st = Route(dir, &s); !st.ok()) return cb(st);
    v1::DirLeaseRequest r;
    r.set_dir(dir);
    r.set_op(v1::DirLeaseRequest::RELEASE);
    CLF_META_CALL(s, DirLease, v1::DirLeaseRequest, v1::DirLeaseReply, r,
                  [cb = std::move(cb)](Status st, v1::DirLeaseReply&) { cb(st); });
  }

  void EndLeaseSession(ServerId s, StatusCallback cb) override {
    if (s >= cluster_.size()) return cb(Status(Code::kInvalid, "no such server"));
    v1::DirLeaseRequest r;
    r.set_op(v1::DirLeaseRequest::END_SESSION);
    CLF_META_CALL(s, DirLease, v1::DirLeaseRequest, v1::DirLeaseReply, r,
                  [cb = std::move(cb)](Status st, v1::DirLeaseReply&) { cb(st); });
  }

  void LeaseEvents(ServerId s, uint32_t wait_ms, Callback<std::vector<Handle>> cb) override {
    if (s >= cluster_.size()) return cb(Status(Code::kInvalid, "no such server"));
    v1::LeaseEventsRequest r;
    r.set_wait_ms(wait_ms);
    Unary<v1::LeaseEventsRequest, v1::LeaseEventsReply>(
        [stub = stubs_[s].meta.get()](grpc::ClientContext* ctx, v1::LeaseEventsRequest* rq,
                                      v1::LeaseEventsReply* rs,
                                      std::function<void(grpc::Status)> done) {
          stub->async()->LeaseEvents(ctx, rq, rs, std::move(done));
        },
        std::move(r),
        std::function<void(Status, v1::LeaseEventsReply&)>(
            [cb = std::move(cb)](Status st, v1::LeaseEventsReply& rep) {
              if (!st.ok()) return cb(st);
              cb(std::vector<Handle>(rep.recall().begin(), rep.recall().end()));
            }),
        wait_ms + timeout_ms_);
  }

  void Commit(ServerId s, std::vector<CommitOp> ops, Callback<std::vector<Status>> cb) override {
    if (s >= cluster_.size()) return cb(Status(Code::kInvalid, "no such server"));
    v1::CommitRequest r;
    // Directories whose attributes the commit changes (a setattr's file, a
    // create's or remove's parent): the cached ones are from before it.
    std::vector<Handle> changed;
    changed.reserve(ops.size());
    for (CommitOp& op : ops) {
      changed.push_back(op.kind == CommitOp::kSetAttr ? op.handle : op.parent);
      v1::CommitOp* o = r.add_ops();
      switch (op.kind) {
        case CommitOp::kCreate: {
          v1::CreateRequest* c = o->mutable_create();
          c->set_parent(op.parent);
          c->set_name(std::move(op.name));
          ToProto(op.caller, c->mutable_caller());
          c->set_type(static_cast<v1::FileType>(op.create.type));
          c->set_mode(op.create.mode);
          c->set_exclusive(true);
          c->set_open_for_write(op.create.open_for_write);
          if (op.create.type == FileType::kSymlink) {
            c->set_symlink_target(std::move(op.create.symlink_target));
          }
          c->set_handle(op.handle);
          *c->mutable_time() = ToProto(op.time);
          break;
        }
        case CommitOp::kLink: {
          v1::LinkRequest* k = o->mutable_link();
          k->set_handle(op.handle);
          k->set_new_parent(op.parent);
          k->set_new_name(std::move(op.name));
          ToProto(op.caller, k->mutable_caller());
          break;
        }
        case CommitOp::kSync:
          o->mutable_sync();
          break;
        case CommitOp::kRename: {
          v1::RenameRequest* n = o->mutable_rename();
          n->set_src_parent(op.parent);
          n->set_src_name(std::move(op.name));
          n->set_dst_parent(op.new_parent);
          n->set_dst_name(std::move(op.new_name));
          n->set_flags(v1::RENAME_FLAG_NOREPLACE);
          ToProto(op.caller, n->mutable_caller());
          break;
        }
        case CommitOp::kRemove: {
          v1::RemoveRequest* m = o->mutable_remove();
          m->set_parent(op.parent);
          m->set_name(std::move(op.name));
          m->set_directory(op.directory);
          ToProto(op.caller, m->mutable_caller());
          break;
        }
        case CommitOp::kSetAttr: {
          v1::SetAttrRequest* a = o->mutable_setattr();
          const SetAttrArgs& sa = op.setattr;
          a->set_handle(op.handle);
          ToProto(op.caller, a->mutable_caller());
          a->set_valid(sa.valid);
          a->set_mode(sa.mode);
          a->set_uid(sa.uid);
          a->set_gid(sa.gid);
          a->set_size(sa.size);
          *a->mutable_atime() = ToProto(sa.atime);
          *a->mutable_mtime() = ToProto(sa.mtime);
          break;
        }
        case CommitOp::kReport: {
          v1::ReportWriteRequest* w = o->mutable_report();
          w->set_handle(op.handle);
          ToProto(op.caller, w->mutable_caller());
          w->set_wrote(op.report.wrote);
          w->set_size(op.report.size);
          w->set_writers_delta(op.report.writers_delta);
          w->set_refresh(op.report.refresh);
          break;
        }
      }
    }
    const int n = r.ops_size();
    CLF_META_CALL(s, Commit, v1::CommitRequest, v1::CommitReply, r,
                  ([this, cb = std::move(cb), n, changed = std::move(changed)](
                       Status st, v1::CommitReply& rep) {
                    for (Handle h : changed) ForgetDir(h);
                    if (!st.ok()) return cb(st);
                    if (rep.code_size() != n || rep.message_size() != n) {
                      return cb(Status(Code::kInternal, "commit reply does not match its request"));
                    }
                    std::vector<Status> out;
                    out.reserve(n);
                    for (int i = 0; i < n; ++i) {
                      out.push_back(rep.code(i) == 0 ? Status::Ok()
                                                     : Status(static_cast<Code>(rep.code(i)),
                                                              rep.message(i)));
                    }
                    cb(std::move(out));
                  }));
  }

  void Readlink(Handle h, Caller caller, Callback<std::string> cb) override {
    ServerId s;
    if (Status st = Route(h, &s); !st.ok()) return cb(st);
    v1::GetAttrRequest r;
    r.set_handle(h);
    ToProto(caller, r.mutable_caller());
    CLF_META_CALL(s, Readlink, v1::GetAttrRequest, v1::ReadlinkReply, r,
                  [cb = std::move(cb)](Status st, v1::ReadlinkReply& rep) {
                    if (!st.ok()) return cb(st);
                    cb(std::move(*rep.mutable_target()));
                  });
  }

  v1::XattrRequest XReq(Handle h, std::string name, const Caller& caller) {
    v1::XattrRequest r;
    r.set_handle(h);
    r.set_name(std::move(name));
    ToProto(caller, r.mutable_caller());
    return r;
  }

  void GetXattr(Handle h, std::string name, Caller caller, Callback<std::string> cb) override {
    ServerId s;
    if (Status st = Route(h, &s); !st.ok()) return cb(st);
    v1::XattrRequest r = XReq(h, std::move(name), caller);
    CLF_META_CALL(s, GetXattr, v1::XattrRequest, v1::XattrReply, r,
                  [cb = std::move(cb)](Status st, v1::XattrReply& rep) {
                    if (!st.ok()) return cb(st);
                    cb(std::move(*rep.mutable_value()));
                  });
  }

  void SetXattr(Handle h, std::string name, std::string value, uint32_t flags, Caller caller,
                StatusCallback cb) override {
    ServerId s;
    if (Status st = Route(h, &s); !st.ok()) return cb(st);
    v1::XattrRequest r = XReq(h, std::move(name), caller);
    r.set_value(std::move(value));
    r.set_flags(flags);
    CLF_META_CALL(s, SetXattr, v1::XattrRequest, v1::XattrReply, r,
                  [cb = std::move(cb)](Status st, v1::XattrReply&) { cb(st); });
  }

  void ListXattr(Handle h, Caller caller, Callback<std::vector<std::string>> cb) override {
    ServerId s;
    if (Status st = Route(h, &s); !st.ok()) return cb(st);
    v1::XattrRequest r = XReq(h, "", caller);
    CLF_META_CALL(s, ListXattr, v1::XattrRequest, v1::XattrReply, r,
                  [cb = std::move(cb)](Status st, v1::XattrReply& rep) {
                    if (!st.ok()) return cb(st);
                    cb(std::vector<std::string>(rep.names().begin(), rep.names().end()));
                  });
  }

  void RemoveXattr(Handle h, std::string name, Caller caller, StatusCallback cb) override {
    ServerId s;
    if (Status st = Route(h, &s); !st.ok()) return cb(st);
    v1::XattrRequest r = XReq(h, std::move(name), caller);
    CLF_META_CALL(s, RemoveXattr, v1::XattrRequest, v1::XattrReply, r,
                  [cb = std::move(cb)](Status st, v1::XattrReply&) { cb(st); });
  }

  void Destroy(Handle h, StatusCallback cb) override {
    ServerId s;
    if (Status st = Route(h, &s); !st.ok()) return cb(st);
    v1::DestroyRequest r;
    r.set_handle(h);
    CLF_META_CALL(s, Destroy, v1::DestroyRequest, v1::DestroyReply, r,
                  [cb = std::move(cb)](Status st, v1::DestroyReply&) { cb(st); });
  }

  // ---- data
  // Fan-in of one call's per-server requests.
  struct Gather {
    std::mutex mu;
    int pending = 0;
    Status first;
    // Records one request's outcome; true for the last one, when `first` is final.
    bool Arrive(const Status& st) {
      std::lock_guard<std::mutex> l(mu);
      if (!st.ok() && first.ok()) first = st;
      return --pending == 0;
    }
  };

  Status CheckRange(Handle h, const Layout& l, uint64_t off, uint64_t len) const {
    ServerId s;
    CLF_RETURN_IF_ERROR(Route(h, &s));
    if (off > kMaxFileSize || len > kMaxFileSize - off) {
      return Status(Code::kFileTooBig, "range past the maximum file size");
    }
    return ValidateLayout(l, cluster_.size());
  }

  // The data path to server s, picked on first use: the TCP data channel, or
  // inline gRPC when transport = grpc, or (auto only) when the data port is
  // unreachable; a fallback is retried after kFallbackRetry. Each change is
  // logged once. Blocks while it dials (only callers of that server wait).
  Result<transport::DataTransport*> Choose(ServerId s) {
    DataPath& p = *paths_[s];
    std::lock_guard<std::mutex> l(p.mu);
    const auto now = std::chrono::steady_clock::now();
    if (p.chosen == TransportKind::kRdma) return p.rdma.get();
    if (p.chosen == TransportKind::kTcp) return p.tcp.get();
    if (p.chosen == TransportKind::kGrpc && (!p.tcp || now < p.retry_at)) return p.grpc.get();
    const std::string addr = cluster_.servers[s].address;
    if (p.rdma) {
      // transport = rdma: RDMA or an error. auto (hardware found): RDMA, else
      // on to the TCP rule below when the server offers no RDMA.
      Status rs = p.rdma->Probe();
      if (rs.ok()) {
        CLF_LOG_INFO("data to server {} ({}): rdma ({} provider) {}", s, addr, p.rdma->provider(),
                     p.rdma->address());
        p.chosen = TransportKind::kRdma;
        return p.rdma.get();
      }
      if (rs.code() != Code::kUnavailable || transport_ == TransportKind::kRdma) {
        Status e = rs.WithContext("rdma data path of server " + std::to_string(s));
        // Asked for by this client only: with transport auto/tcp/grpc the
        // servers listen for RDMA only on hosts with an RDMA device.
        if (cluster_.transport != TransportKind::kRdma) {
          e = Status(e.code(), e.message() +
                                   " (the cluster's transport is not \"rdma\": its servers listen for RDMA "
                                   "only on hosts with an RDMA device; set transport = \"rdma\" in the "
                                   "cluster file, e.g. `clf up --set 'transport=\"rdma\"'`, to run the "
                                   "RDMA path on libfabric's tcp provider)");
        }
        return e;
      }
      CLF_LOG_WARN("data to server {} ({}): rdma {} unreachable ({}); trying tcp", s, addr,
                   p.rdma->address(), rs.message());
      p.rdma.reset();
    }
    if (!p.tcp) {
      if (transport_ == TransportKind::kGrpc) {
        CLF_LOG_INFO("data to server {} ({}): inline grpc (transport = grpc)", s, addr);
      } else {
        CLF_LOG_WARN("data to server {} ({}): inline grpc: no data channel address ({})", s, addr,
                     p.no_tcp.ToString());
      }
      p.chosen = TransportKind::kGrpc;
      return p.grpc.get();
    }
    Status st = p.tcp->Probe();
    if (st.ok()) {
      CLF_LOG_INFO("data to server {} ({}): tcp data channel {}", s, addr, p.tcp->address());
      p.chosen = TransportKind::kTcp;
      return p.tcp.get();
    }
    if (st.code() != Code::kUnavailable || transport_ == TransportKind::kTcp) {
      return st.WithContext("data channel of server " + std::to_string(s));
    }
    if (p.chosen != TransportKind::kGrpc) {
      CLF_LOG_WARN("data to server {} ({}): data port {} unreachable ({}); falling back to inline "
                   "grpc (retried every {} s)",
                   s, addr, p.tcp->address(), st.message(), kFallbackRetry.count());
    }
    p.chosen = TransportKind::kGrpc;
    p.retry_at = now + kFallbackRetry;
    return p.grpc.get();
  }

  static std::vector<transport::Extent> ExtentsOf(const std::vector<Piece>& pieces) {
    std::vector<transport::Extent> out;
    out.reserve(pieces.size());
    for (const Piece& p : pieces) out.push_back(transport::Extent{p.local_offset, p.length});
    return out;
  }
  // The caller's buffer (starting at logical offset `base`) cut into the pieces' order.
  static std::vector<iovec> IovecsOf(const std::vector<Piece>& pieces, char* buf, uint64_t base) {
    std::vector<iovec> out;
    out.reserve(pieces.size());
    for (const Piece& p : pieces) out.push_back(iovec{buf + (p.logical_offset - base), p.length});
    return out;
  }

  // The schedule settings of a file: its layout's (set on its directory),
  // else this client's (mount options), else the cluster file's.
  SchedSettings SchedFor(const Layout& l) const {
    SchedSettings s = sched_;
    if (l.sched_policy != kSchedUnset && l.sched_policy <= kMaxSchedCode) {
      s.policy = SchedFromCode(l.sched_policy);
    }
    if (l.sched_block != 0) s.block = l.sched_block;
    if (s.window == 0) s.window = std::max<uint32_t>(1, l.stripe_count);
    return s;
  }

  // Runs one request's schedule blocks (paper 000): `blocks` in send order,
  // at most `window` outstanding. `io` moves one block (blocking, on a
  // data_ex_ thread); `done` runs once with the first error, after every
  // started block finished. After an error no further block is started.
  // Each of min(window, blocks) workers takes the next block when its last
  // one finished, so the window holds exactly.
  struct BlockRun {
    std::mutex mu;  // guards win, first, workers
    std::vector<scheduler::DataBlock> blocks;
    scheduler::BlockWindow win;
    Status first;
    int workers = 0;
    const uint32_t window;
    uint32_t tag = 0;  // reads: the scheduling tag for the servers' read queues
    std::function<Status(const scheduler::DataBlock&)> io;
    std::function<void(Status)> done;
    BlockRun(std::vector<scheduler::DataBlock> b, uint32_t w)
        : blocks(std::move(b)), win(blocks.size(), w), window(std::max<uint32_t>(1, w)) {}
  };
  void RunBlocks(std::shared_ptr<BlockRun> run) {
    const size_t workers = std::min<size_t>(run->blocks.size(), run->window);
    run->workers = static_cast<int>(workers);
    for (size_t w = 0; w < workers; ++w) {
      data_ex_.Submit([run] {
        for (;;) {
          std::optional<size_t> i;
          {
            std::lock_guard<std::mutex> l(run->mu);
            if (run->first.ok()) i = run->win.Start();
            if (!i) {
              if (--run->workers > 0) return;
            }
          }
          if (!i) return run->done(run->first);
          Status st = run->io(run->blocks[*i]);
          std::lock_guard<std::mutex> l(run->mu);
          run->win.Finish();
          if (!st.ok() && run->first.ok()) run->first = st;
        }
      });
    }
  }

  std::shared_ptr<BlockRun> PlanRun(const Layout& layout, uint64_t offset, uint64_t length) {
    const SchedSettings s = SchedFor(layout);
    const uint64_t seed =
        rank_ * 0x9e3779b97f4a7c15ULL + seq_.fetch_add(1, std::memory_order_relaxed);
    auto run = std::make_shared<BlockRun>(
        scheduler::PlanDataBlocks(layout, cluster_.size(), offset, length, s.policy, s.block, rank_,
                                  seed),
        s.window);
    run->tag = transport::SchedTag(SchedCode(s.policy), rank_);
    return run;
  }

  void Write(Handle h, const Layout& layout, uint64_t offset, std::string data,
             Callback<uint64_t> cb) override {
    if (Status st = CheckRange(h, layout, offset, data.size()); !st.ok()) return cb(st);
    if (data.empty()) return cb(uint64_t{0});
    const uint64_t total = data.size();
    std::shared_ptr<BlockRun> run = PlanRun(layout, offset, total);
    // The payload moves from this buffer to the sockets: no per-block copy.
    auto buf = std::make_shared<std::string>(std::move(data));
    run->io = [this, h, buf, offset](const scheduler::DataBlock& b) {
      Result<transport::DataTransport*> t = Choose(b.server);
      if (!t.ok()) return t.status();
      return (*t)->Write(h, ExtentsOf(b.pieces), IovecsOf(b.pieces, buf->data(), offset), false);
    };
    run->done = [cb = std::move(cb), total](Status st) {
      if (!st.ok()) return cb(st);
      cb(total);
    };
    RunBlocks(std::move(run));
  }

  void Read(Handle h, const Layout& layout, uint64_t offset, uint64_t length,
            Callback<std::string> cb) override {
    ReadInto(h, layout, offset, length, std::string(), std::move(cb));
  }

  void ReadInto(Handle h, const Layout& layout, uint64_t offset, uint64_t length, std::string buffer,
                Callback<std::string> cb) override {
    if (Status st = CheckRange(h, layout, offset, length); !st.ok()) return cb(st);
    if (length > kMaxIoBytes) return cb(Status(Code::kTooBig, "read larger than 64 MiB"));
    if (length == 0) return cb(std::string());
    std::shared_ptr<BlockRun> run = PlanRun(layout, offset, length);
    // Each block receives straight into its own pieces of `out` (every byte
    // is overwritten: a reused buffer is not filled first).
    auto out = std::make_shared<std::string>(std::move(buffer));
    out->resize(length);
    run->io = [this, h, out, offset, tag = run->tag](const scheduler::DataBlock& b) {
      Result<transport::DataTransport*> t = Choose(b.server);
      if (!t.ok()) return t.status();
      return (*t)->ReadTagged(h, ExtentsOf(b.pieces), IovecsOf(b.pieces, out->data(), offset), tag);
    };
    run->done = [cb = std::move(cb), out](Status st) {
      if (!st.ok()) return cb(st);
      cb(std::move(*out));
    };
    RunBlocks(std::move(run));
  }

  void ReadToPipe(Handle h, const Layout& layout, uint64_t offset, uint64_t length, int pipe_w,
                  int pipe_r, std::string buffer, Callback<PipedRead> cb) override {
    if (Status st = CheckRange(h, layout, offset, length); !st.ok()) return cb(st);
    if (length > kMaxIoBytes) return cb(Status(Code::kTooBig, "read larger than 64 MiB"));
    std::shared_ptr<BlockRun> run = PlanRun(layout, offset, length);
    // The pipe takes the pieces in their order: one block whose pieces run
    // from offset to the end in order.
    bool one = run->blocks.size() == 1;
    uint64_t pos = offset;
    for (size_t i = 0; one && i < run->blocks[0].pieces.size(); ++i) {
      const Piece& p = run->blocks[0].pieces[i];
      one = p.logical_offset == pos;
      pos += p.length;
    }
    if (!one || pos != offset + length) {
      // Several blocks (servers): ReadInto's path, in memory.
      return ReadInto(h, layout, offset, length, std::move(buffer),
                      [cb = std::move(cb)](Result<std::string> r) {
                        if (!r.ok()) return cb(r.status());
                        cb(PipedRead{false, std::move(*r)});
                      });
    }
    auto out = std::make_shared<PipedRead>();
    out->bytes = std::move(buffer);
    run->io = [this, h, out, length, pipe_w, pipe_r, tag = run->tag](const scheduler::DataBlock& b) {
      Result<transport::DataTransport*> t = Choose(b.server);
      if (!t.ok()) return t.status();
      return (*t)->ReadToPipe(h, ExtentsOf(b.pieces), length, pipe_w, pipe_r, tag, &out->in_pipe,
                              &out->bytes);
    };
    run->done = [cb = std::move(cb), out](Status st) {
      if (!st.ok()) return cb(st);
      cb(std::move(*out));
    };
    RunBlocks(std::move(run));
  }

  // List I/O (client/list_io.*): one request per server, all servers at once.
  void WriteList(Handle h, const Layout& layout, std::vector<FileExtent> extents, std::string data,
                 Callback<uint64_t> cb) override {
    RunList(h, layout, extents, std::make_shared<std::string>(std::move(data)), true,
            [cb = std::move(cb)](Status st, std::shared_ptr<std::string> buf) {
              if (!st.ok()) return cb(st);
              cb(static_cast<uint64_t>(buf->size()));
            });
  }
  void ReadList(Handle h, const Layout& layout, std::vector<FileExtent> extents,
                Callback<std::string> cb) override {
    RunList(h, layout, extents, nullptr, false,
            [cb = std::move(cb)](Status st, std::shared_ptr<std::string> buf) {
              if (!st.ok()) return cb(st);
              cb(std::move(*buf));
            });
  }
  // A write sends `buf`; a read (buf null) allocates it. Each server's
  // requests run on one data_ex_ task, in order.
  void RunList(Handle h, const Layout& layout, const std::vector<FileExtent>& extents,
               std::shared_ptr<std::string> buf, bool write,
               std::function<void(Status, std::shared_ptr<std::string>)> done) {
    if (Status st = CheckRange(h, layout, 0, 0); !st.ok()) return done(st, nullptr);
    uint64_t total = 0;
    Result<std::vector<ListRequest>> plan = PlanListIo(layout, cluster_.size(), extents, &total);
    if (!plan.ok()) return done(plan.status(), nullptr);
    if (write && buf->size() != total) {
      return done(Invalid("list write: data size differs from the extents' total length"), nullptr);
    }
    if (!write) buf = std::make_shared<std::string>(total, '\0');
    if (plan->empty()) return done(Status::Ok(), buf);
    std::vector<std::vector<ListRequest>> groups;
    for (ListRequest& r : *plan) {
      if (groups.empty() || groups.back().front().server != r.server) groups.emplace_back();
      groups.back().push_back(std::move(r));
    }
    const uint32_t tag = transport::SchedTag(SchedCode(SchedFor(layout).policy), rank_);
    auto g = std::make_shared<Gather>();
    g->pending = static_cast<int>(groups.size());
    auto shared_done = std::make_shared<decltype(done)>(std::move(done));
    for (std::vector<ListRequest>& group : groups) {
      data_ex_.Submit([this, h, g, buf, write, tag, shared_done, reqs = std::move(group)] {
        Status st;
        for (const ListRequest& r : reqs) {
          Result<transport::DataTransport*> t = Choose(r.server);
          if (!t.ok()) {
            st = t.status();
            break;
          }
          std::vector<iovec> iov = ListIovecs(r, buf->data());
          st = write ? (*t)->Write(h, r.extents, iov, false) : (*t)->ReadTagged(h, r.extents, iov, tag);
          if (!st.ok()) break;
        }
        if (g->Arrive(st)) (*shared_done)(g->first, buf);
      });
    }
  }

  void Sync(Handle h, const Layout& layout, StatusCallback cb) override {
    std::vector<ServerId> servers;
    if (layout == Layout{0, 0, 0, 0}) {  // a directory: its metadata server only
      if (Status st = Route(h, &servers.emplace_back()); !st.ok()) return cb(st);
    } else {
      if (Status st = CheckRange(h, layout, 0, 0); !st.ok()) return cb(st);
      servers = DataServers(layout, cluster_.size());
      // The metadata server's WAL too (it may hold no data of this file).
      if (std::find(servers.begin(), servers.end(), ServerOf(h)) == servers.end()) {
        servers.push_back(ServerOf(h));
      }
    }
    auto g = std::make_shared<Gather>();
    g->pending = static_cast<int>(servers.size());
    auto shared_cb = std::make_shared<StatusCallback>(std::move(cb));
    for (ServerId s : servers) {
      data_ex_.Submit([this, h, g, shared_cb, s] {
        Result<transport::DataTransport*> t = Choose(s);
        Status st = t.ok() ? (*t)->Sync(h) : t.status();
        if (g->Arrive(st)) (*shared_cb)(g->first);
      });
    }
  }

  // ---- cluster
  void StatusAll(std::function<void(std::vector<std::pair<Status, v1::StatusReply>>)> done,
                 uint32_t timeout_ms) {
    struct G {
      std::mutex mu;
      int pending;
      std::vector<std::pair<Status, v1::StatusReply>> out;
    };
    auto g = std::make_shared<G>();
    g->pending = static_cast<int>(cluster_.size());
    g->out.resize(cluster_.size());
    auto shared_done = std::make_shared<decltype(done)>(std::move(done));
    for (ServerId s = 0; s < cluster_.size(); ++s) {
      Unary<v1::StatusRequest, v1::StatusReply>(
          [stub = stubs_[s].admin.get()](grpc::ClientContext* ctx, v1::StatusRequest* rq,
                                         v1::StatusReply* rs, std::function<void(grpc::Status)> cb) {
            stub->async()->Status(ctx, rq, rs, std::move(cb));
          },
          v1::StatusRequest(),
          std::function<void(Status, v1::StatusReply&)>([g, s, shared_done](Status st, v1::StatusReply& r) {
            std::unique_lock<std::mutex> l(g->mu);
            g->out[s] = {st, r};
            if (--g->pending > 0) return;
            l.unlock();
            (*shared_done)(std::move(g->out));
          }),
          timeout_ms);
    }
  }

  void StatFs(Callback<struct StatFs> cb) override {
    StatusAll(
        [cb = std::move(cb)](std::vector<std::pair<Status, v1::StatusReply>> all) {
          struct StatFs f;
          for (auto& [st, r] : all) {
            if (!st.ok()) {
              ++f.servers_down;
              continue;
            }
            ++f.servers_up;
            f.bytes_total += r.bytes_total();
            f.bytes_free += r.bytes_free();
            f.files += r.inodes() + r.files_free();
            f.files_free += r.files_free();
          }
          if (f.servers_up == 0) return cb(Unavailable("no server answers"));
          cb(f);
        },
        timeout_ms_);
  }

  std::vector<ServerStatus> ServerStatuses() override {
    std::promise<std::vector<std::pair<Status, v1::StatusReply>>> p;
    auto fut = p.get_future();
    auto wall_ms = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
    const int64_t sent_ms = wall_ms();
    StatusAll([&p](std::vector<std::pair<Status, v1::StatusReply>> all) { p.set_value(std::move(all)); },
              std::min<uint32_t>(timeout_ms_, 3000));
    auto all = fut.get();
    const int64_t done_ms = wall_ms();
    std::vector<ServerStatus> out;
    for (ServerId s = 0; s < all.size(); ++s) {
      ServerStatus ss;
      ss.id = s;
      ss.address = cluster_.servers[s].address;
      ss.up = all[s].first.ok();
      if (!ss.up) {
        ss.error = all[s].first.ToString();
      } else {
        const v1::StatusReply& r = all[s].second;
        ss.uptime_s = r.uptime_s();
        ss.objects = r.objects();
        ss.inodes = r.inodes();
        ss.bytes_used = r.bytes_used();
        ss.bytes_free = r.bytes_free();
        ss.bytes_total = r.bytes_total();
        ss.files_free = r.files_free();
        ss.rocksdb_bytes = r.rocksdb_bytes();
        ss.requests = r.requests();
        ss.lock_sessions = r.lock_sessions();
        ss.locks_granted = r.locks_granted();
        ss.locks_waiting = r.locks_waiting();
        ss.garbage = r.garbage();
        ss.version = r.version();
        ss.clock_skew_ms = r.wall_time_ms() - (sent_ms + done_ms) / 2;
        ss.clock_skew_error_ms = (done_ms - sent_ms + 1) / 2;
        ss.transport = r.transport().empty() ? "grpc" : r.transport();
        ss.data_address = r.data_address();
        ss.rename_intents = r.rename_intents();
        ss.rename_outcomes = r.rename_outcomes();
      }
      out.push_back(std::move(ss));
    }
    return out;
  }

  Result<ObjectListing> ListObjects(ServerId server) override {
    if (server >= cluster_.size()) return Invalid("no such server");
    grpc::ClientContext ctx;
    Prepare(&ctx, 60000);
    v1::ListObjectsReply rep;
    Status st = FromGrpc(stubs_[server].admin->ListObjects(&ctx, v1::ListObjectsRequest(), &rep));
    if (!st.ok()) return st;
    ObjectListing l;
    l.data_objects.assign(rep.data_objects().begin(), rep.data_objects().end());
    l.meta_objects.assign(rep.meta_objects().begin(), rep.meta_objects().end());
    l.orphans.assign(rep.orphans().begin(), rep.orphans().end());
    return l;
  }

  Status RemoveDataObject(ServerId server, Handle h) override {
    if (server >= cluster_.size()) return Invalid("no such server");
    grpc::ClientContext ctx;
    Prepare(&ctx);
    v1::RemoveObjectRequest r;
    r.set_handle(h);
    v1::RemoveObjectReply rep;
    return FromGrpc(stubs_[server].admin->RemoveObject(&ctx, r, &rep));
  }

 private:
  struct Stubs {
    std::unique_ptr<v1::Meta::Stub> meta;
    std::unique_ptr<v1::Admin::Stub> admin;
  };
  // One server's data path (see Choose).
  struct DataPath {
    std::mutex mu;  // guards chosen and retry_at; held while probing
    std::unique_ptr<transport::RdmaTransport> rdma;  // null: RDMA not asked for (or unreachable)
    std::unique_ptr<transport::TcpTransport> tcp;  // null: transport = grpc or no data address
    std::unique_ptr<transport::GrpcTransport> grpc;
    Status no_tcp;                                 // why tcp is null
    TransportKind chosen = TransportKind::kAuto;   // kAuto: not picked yet
    std::chrono::steady_clock::time_point retry_at;
  };
  static constexpr size_t kConnectionsPerServer = 4;
  static constexpr std::chrono::seconds kFallbackRetry{30};
  ClusterConfig cluster_;
  std::shared_ptr<CallCount> live_ = std::make_shared<CallCount>();
  Credentials cred_;
  uint64_t session_ = 0;
  std::string session_str_;
  uint32_t timeout_ms_ = 5000;
  uint32_t dir_cache_ms_ = 0;
  std::vector<Stubs> stubs_;
  std::mutex dir_mu_;  // guards dir_cache_
  std::unordered_map<Handle, std::pair<Attr, std::chrono::steady_clock::time_point>> dir_cache_;
  const TransportKind transport_;
  std::vector<std::unique_ptr<DataPath>> paths_;
  std::unique_ptr<BaselinePath> baseline_;  // metadata_mode = "client" only
  SchedSettings sched_;           // the cluster file's, overridden by ClientOptions
  uint32_t rank_ = 0;             // this client's rank (24 bits)
  std::atomic<uint64_t> seq_{0};  // requests planned: varies random-IOS's seed
  // Runs data requests (they block on sockets) and their callbacks. Declared
  // last: destroyed first, so queued requests finish while paths_ lives.
  Executor data_ex_{"clf-data", 16};
};

#undef CLF_META_CALL

// Runs an async call and waits for its result.
template <typename T, typename Start>
Result<T> Wait(Start start) {
  std::promise<Result<T>> p;
  auto f = p.get_future();
  start([&p](Result<T> r) { p.set_value(std::move(r)); });
  return f.get();
}

template <typename Start>
Status WaitStatus(Start start) {
  std::promise<Status> p;
  auto f = p.get_future();
  start([&p](Status s) { p.set_value(std::move(s)); });
  return f.get();
}

}  // namespace

Result<std::unique_ptr<Client>> Client::Open(const std::string& cluster_file, ClientOptions opts) {
  CLF_ASSIGN_OR_RETURN(ClusterConfig c, LoadClusterConfig(cluster_file));
  return Open(c, opts);
}

Status Client::CheckCredentials(const ClusterConfig& cluster, const ClientOptions& opts) {
  return LoadClientCredentials(cluster, opts.tls_cert, opts.tls_key, opts.secret_file).status();
}

Result<std::unique_ptr<Client>> Client::Open(const ClusterConfig& cluster, ClientOptions opts) {
  CLF_RETURN_IF_ERROR(cluster.Validate());
  CLF_ASSIGN_OR_RETURN(Credentials cred, LoadClientCredentials(cluster, opts.tls_cert, opts.tls_key,
                                                               opts.secret_file));
  SslCtxPtr data_tls;
  if (cred.tls) {
    CLF_ASSIGN_OR_RETURN(data_tls, MakeDataTlsContext(cred, /*server=*/false));
  }
  TransportKind transport = cluster.transport;
  if (!opts.transport.empty()) {
    CLF_ASSIGN_OR_RETURN(transport, ParseTransport(opts.transport));
  }
  CLF_RETURN_IF_ERROR(CheckTransport(transport));
  if (!opts.sched.empty()) CLF_RETURN_IF_ERROR(ParseOrderPolicy(opts.sched).status());
  if (opts.sched_block != 0) CLF_RETURN_IF_ERROR(ValidateSchedBlock(opts.sched_block));
  if (opts.sched_window > kMaxSchedWindow) return Invalid("sched_window larger than 1024");
  return std::unique_ptr<Client>(
      new GrpcClient(cluster, std::move(cred), std::move(data_tls), opts, transport));
}

Result<Attr> Client::LookupSync(Handle parent, const std::string& name, const Caller& c) {
  return Wait<Attr>([&](Callback<Attr> cb) { Lookup(parent, name, c, std::move(cb)); });
}
Result<Attr> Client::GetAttrSync(Handle h, const Caller& c) {
  return Wait<Attr>([&](Callback<Attr> cb) { GetAttr(h, c, std::move(cb)); });
}
Result<Attr> Client::SetAttrSync(Handle h, const SetAttrArgs& a, const Caller& c) {
  return Wait<Attr>([&](Callback<Attr> cb) { SetAttr(h, a, c, std::move(cb)); });
}
Result<Attr> Client::CreateSync(Handle parent, const std::string& name, const CreateArgs& a,
                                const Caller& c) {
  return Wait<Attr>([&](Callback<Attr> cb) { Create(parent, name, a, c, std::move(cb)); });
}
Result<Attr> Client::LinkSync(Handle h, Handle np, const std::string& name, const Caller& c) {
  return Wait<Attr>([&](Callback<Attr> cb) { Link(h, np, name, c, std::move(cb)); });
}
Result<RemoveResult> Client::RemoveSync(Handle parent, const std::string& name, bool directory,
                                        const Caller& c) {
  return Wait<RemoveResult>(
      [&](Callback<RemoveResult> cb) { Remove(parent, name, directory, false, c, std::move(cb)); });
}
Result<RemoveResult> Client::RenameSync(Handle sp, const std::string& sn, Handle dp,
                                        const std::string& dn, uint32_t flags, const Caller& c) {
  return Wait<RemoveResult>(
      [&](Callback<RemoveResult> cb) { Rename(sp, sn, dp, dn, flags, false, c, std::move(cb)); });
}
Result<DirPage> Client::ReadDirSync(Handle dir, const std::string& after, uint32_t max, bool plus,
                                    const Caller& c) {
  return Wait<DirPage>([&](Callback<DirPage> cb) { ReadDir(dir, after, max, plus, c, std::move(cb)); });
}
Result<std::string> Client::ReadlinkSync(Handle h, const Caller& c) {
  return Wait<std::string>([&](Callback<std::string> cb) { Readlink(h, c, std::move(cb)); });
}
Result<uint64_t> Client::WriteSync(Handle h, const Layout& l, uint64_t off, std::string data) {
  Result<uint64_t> n =
      Wait<uint64_t>([&](Callback<uint64_t> cb) { Write(h, l, off, std::move(data), std::move(cb)); });
  if (!n.ok() || *n == 0) return n;
  ReportWriteArgs a;
  a.wrote = true;
  a.size = off + *n;
  a.refresh = true;
  CLF_RETURN_IF_ERROR(ReportWriteSync(h, a).status());
  return n;
}
Result<uint64_t> Client::WriteListSync(Handle h, const Layout& l, std::vector<FileExtent> extents,
                                       std::string data) {
  return Wait<uint64_t>([&](Callback<uint64_t> cb) {
    WriteList(h, l, std::move(extents), std::move(data), std::move(cb));
  });
}
Result<std::string> Client::ReadListSync(Handle h, const Layout& l, std::vector<FileExtent> extents) {
  return Wait<std::string>(
      [&](Callback<std::string> cb) { ReadList(h, l, std::move(extents), std::move(cb)); });
}
Result<Attr> Client::ReportWriteSync(Handle h, const ReportWriteArgs& a, const Caller& c) {
  return Wait<Attr>([&](Callback<Attr> cb) { ReportWrite(h, a, c, std::move(cb)); });
}
Result<std::string> Client::ReadSync(Handle h, const Layout& l, uint64_t off, uint64_t len) {
  return Wait<std::string>([&](Callback<std::string> cb) { Read(h, l, off, len, std::move(cb)); });
}
Status Client::SyncSync(Handle h, const Layout& l) {
  return WaitStatus([&](StatusCallback cb) { Sync(h, l, std::move(cb)); });
}
Result<StatFs> Client::StatFsSync() {
  return Wait<struct StatFs>([&](Callback<struct StatFs> cb) { StatFs(std::move(cb)); });
}
Status Client::SetXattrSync(Handle h, const std::string& n, const std::string& v, uint32_t flags,
                            const Caller& c) {
  return WaitStatus([&](StatusCallback cb) { SetXattr(h, n, v, flags, c, std::move(cb)); });
}
Result<std::string> Client::GetXattrSync(Handle h, const std::string& n, const Caller& c) {
  return Wait<std::string>([&](Callback<std::string> cb) { GetXattr(h, n, c, std::move(cb)); });
}
Result<std::vector<std::string>> Client::ListXattrSync(Handle h, const Caller& c) {
  return Wait<std::vector<std::string>>(
      [&](Callback<std::vector<std::string>> cb) { ListXattr(h, c, std::move(cb)); });
}
Status Client::RemoveXattrSync(Handle h, const std::string& n, const Caller& c) {
  return WaitStatus([&](StatusCallback cb) { RemoveXattr(h, n, c, std::move(cb)); });
}

Result<Attr> Client::ResolvePath(const std::string& path, const Caller& c) {
  if (path.empty() || path[0] != '/') return Invalid("path must be absolute inside the file system");
  CLF_ASSIGN_OR_RETURN(Attr cur, GetAttrSync(root(), c));
  size_t pos = 1;
  while (pos < path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string::npos) next = path.size();
    std::string comp = path.substr(pos, next - pos);
    pos = next + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..") return Invalid("'..' is not supported in paths given to libclf");
    if (cur.type != FileType::kDirectory) return Status(Code::kNotDir, "not a directory: " + comp);
    CLF_ASSIGN_OR_RETURN(cur, LookupSync(cur.handle, comp, c));
  }
  return cur;
}

}  // namespace clf::client
