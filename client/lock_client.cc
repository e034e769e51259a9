// LockClient over gRPC: one Lock stub per server, sessions opened on first use,
// renewed by one background thread, callbacks on gRPC's threads.
#include "clf/lock_client.h"

#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include "clf/v1/lock.grpc.pb.h"
#include "common/credentials.h"
#include "common/log.h"
#include "common/status_grpc.h"
#include "common/tsan.h"

namespace clf::client {
namespace {

constexpr uint32_t kSliceMs = 30 * 60 * 1000;  // an endless wait asks for this, then again

v1::LockMode ToProto(LockMode m) {
  return m == LockMode::kExclusive ? v1::LOCK_EXCLUSIVE : v1::LOCK_SHARED;
}
LockMode FromProto(v1::LockMode m) {
  return m == v1::LOCK_EXCLUSIVE ? LockMode::kExclusive : LockMode::kShared;
}

LockConflict FromProto(const v1::TestReply& r) {
  LockConflict c;
  c.conflict = r.conflict();
  c.session = r.session();
  c.owner = r.owner();
  c.mode = FromProto(r.mode());
  c.offset = r.offset();
  c.length = r.length();
  c.pid = r.pid();
  c.client_name = r.client_name();
  return c;
}

std::string DefaultName() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(host) + ":" + std::to_string(getpid());
}

// One server's session: opened on first use, renewed by the background thread.
struct ServerSession {
  std::mutex mu;
  bool open = false;
  bool opening = false;
  v1::SessionRef ref;
  uint32_t lease_ms = 0;
  std::chrono::steady_clock::time_point renewed;
  std::vector<std::function<void(Status, v1::SessionRef)>> waiters;
  // Lost while this client held locks there: the next open (on the renewal
  // thread) names lost_ref so that the server lets it reclaim them.
  bool reclaim_pending = false;
  bool reclaiming = false;
  v1::SessionRef lost_ref;
  // Lost while this client held nothing there: the renewal thread tells the
  // server (ReclaimComplete naming lost_ref only) so that a grace period after
  // a restart need not wait for this session.
  bool announce_pending = false;
  std::chrono::steady_clock::time_point retry_at;
};

// What this client holds, to reclaim it after a server restart.
struct TrackedList {
  ServerId server = 0;
  v1::AcquireRequest req;                   // as granted (session and wait fields are refilled)
  uint64_t id = 0, session = 0, epoch = 0;  // the lock as the server knows it now
};
struct PosixSeg {
  uint64_t end = 0;  // UINT64_MAX: to the end of the file
  v1::PosixOp op = v1::POSIX_READ;
};
struct PosixOwnerState {
  std::map<uint64_t, PosixSeg> ranges;  // start -> segment, disjoint
  std::optional<v1::PosixOp> flock;
  uint32_t pid = 0;
};

// Sets [start, end) of an owner's fcntl locks to `op` (POSIX_UNLOCK removes), as
// the server does, without merging (a reclaim of split segments merges there).
void ApplyRange(std::map<uint64_t, PosixSeg>* m, uint64_t start, uint64_t end, v1::PosixOp op) {
  auto it = m->lower_bound(start);
  if (it != m->begin() && std::prev(it)->second.end > start) --it;
  std::vector<std::pair<uint64_t, PosixSeg>> keep;
  while (it != m->end() && it->first < end) {
    const uint64_t s0 = it->first;
    const PosixSeg seg = it->second;
    it = m->erase(it);
    if (s0 < start) keep.push_back({s0, PosixSeg{start, seg.op}});
    if (seg.end > end) keep.push_back({end, PosixSeg{seg.end, seg.op}});
  }
  for (auto& k : keep) m->insert(k);
  if (op != v1::POSIX_UNLOCK) (*m)[start] = PosixSeg{end, op};
}

class PendingCall final : public PendingLock {
 public:
  void Cancel() override {
    std::lock_guard<std::mutex> l(mu_);
    cancelled_ = true;
    if (ctx_) ctx_->TryCancel();
  }
  // A fresh context for the next attempt; nullptr if cancelled.
  std::shared_ptr<grpc::ClientContext> NextContext() {
    std::lock_guard<std::mutex> l(mu_);
    if (cancelled_) return nullptr;
    ctx_ = std::make_shared<grpc::ClientContext>();
    return ctx_;
  }
  bool cancelled() {
    std::lock_guard<std::mutex> l(mu_);
    return cancelled_;
  }

 private:
  std::mutex mu_;
  bool cancelled_ = false;
  std::shared_ptr<grpc::ClientContext> ctx_;
};

class GrpcLockClient final : public LockClient {
 public:
  GrpcLockClient(const ClusterConfig& cluster, Credentials cred, LockClientOptions opts)
      : cred_(std::move(cred)), opts_(std::move(opts)) {
    timeout_ms_ = opts_.rpc_timeout_ms ? opts_.rpc_timeout_ms : cluster.rpc_timeout_ms;
    if (opts_.client_name.empty()) opts_.client_name = DefaultName();
    HoldCallbackQueue();
    for (const ServerConfig& s : cluster.servers) {
      auto ch =
          grpc::CreateCustomChannel(s.address, ChannelCredentialsFor(cred_), ClfChannelArgs());
      stubs_.push_back(v1::Lock::NewStub(ch));
      sessions_.push_back(std::make_unique<ServerSession>());
    }
    renewer_ = std::thread([this] { RenewLoop(); });
  }

  ~GrpcLockClient() override {
    {
      std::lock_guard<std::mutex> l(stop_mu_);
      stop_ = true;
    }
    stop_cv_.notify_all();
    renewer_.join();
    for (size_t i = 0; i < sessions_.size(); ++i) {
      v1::SessionRef ref;
      {
        std::lock_guard<std::mutex> l(sessions_[i]->mu);
        if (!sessions_[i]->open) continue;
        ref = sessions_[i]->ref;
        sessions_[i]->open = false;
      }
      grpc::ClientContext ctx;
      Prepare(&ctx, std::min<uint32_t>(timeout_ms_, 2000));
      v1::SessionRequest req;
      *req.mutable_session() = ref;
      v1::SessionReply rep;
      stubs_[i]->CloseSession(&ctx, req, &rep).error_code();  // best effort: the lease ends anyway
    }
  }

  void Prepare(grpc::ClientContext* ctx, uint64_t timeout_ms) const {
    AddCallCredentials(ctx, cred_);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  }

  Status Route(Handle h, ServerId* s) const {
    *s = ServerOf(h);
    if (h == 0 || *s >= stubs_.size()) return Status(Code::kStale, "handle names no server of this cluster");
    return Status::Ok();
  }

  // ---- sessions
  void WithSession(ServerId s, std::function<void(Status, v1::SessionRef)> fn) {
    ServerSession& ss = *sessions_[s];
    std::unique_lock<std::mutex> l(ss.mu);
    if (ss.open) {
      v1::SessionRef ref = ss.ref;
      l.unlock();
      return fn(Status::Ok(), ref);
    }
    ss.waiters.push_back(std::move(fn));
    if (ss.opening) return;
    if (ss.reclaim_pending) {
      // The renewal thread reopens with a reclaim and then runs the queued calls.
      l.unlock();
      stop_cv_.notify_all();
      return;
    }
    ss.opening = true;
    l.unlock();
    struct Call {
      grpc::ClientContext ctx;
      v1::OpenSessionRequest req;
      v1::OpenSessionReply rep;
    };
    auto call = std::make_shared<Call>();
    Prepare(&call->ctx, timeout_ms_);
    call->req.set_lease_ms(opts_.lease_ms);
    call->req.set_client_name(opts_.client_name);
    stubs_[s]->async()->OpenSession(
        &call->ctx, &call->req, &call->rep,
        tsan::Handoff(call.get(), [this, s, call](grpc::Status gs) {
          Status st = FromGrpc(gs);
          ServerSession& ss = *sessions_[s];
          std::vector<std::function<void(Status, v1::SessionRef)>> waiters;
          {
            std::lock_guard<std::mutex> l(ss.mu);
            ss.opening = false;
            if (st.ok()) {
              ss.open = true;
              ss.ref = call->rep.session();
              ss.lease_ms = call->rep.lease_ms();
              ss.renewed = std::chrono::steady_clock::now();
            }
            waiters.swap(ss.waiters);
          }
          if (st.ok()) {
            CLF_LOG_DEBUG("lock session {} on server {} (lease {} ms)", call->rep.session().id(), s,
                          call->rep.lease_ms());
          }
          for (auto& w : waiters)
            w(st.WithContext("open lock session on server " + std::to_string(s)),
              call->rep.session());
        }));
  }

  Result<v1::SessionRef> SessionSync(ServerId s) {
    std::promise<Result<v1::SessionRef>> p;
    auto f = p.get_future();
    WithSession(s, [&p](Status st, v1::SessionRef ref) {
      if (st.ok()) {
        p.set_value(ref);
      } else {
        p.set_value(st);
      }
    });
    return f.get();
  }

  // The server said kStale for `ref`: forget it so that the next call opens a new one.
  void Lost(ServerId s, const v1::SessionRef& ref) {
    const bool held = HoldsOn(s);
    ServerSession& ss = *sessions_[s];
    {
      std::lock_guard<std::mutex> l(ss.mu);
      if (!ss.open || ss.ref.id() != ref.id() || ss.ref.epoch() != ref.epoch()) return;
      ss.open = false;
      if (held) {
        ss.reclaim_pending = true;
        ss.lost_ref = ref;
        ss.retry_at = {};
        CLF_LOG_WARN(
            "lock session {} on server {} is lost (lease expired or server restarted): "
            "reclaiming its locks",
            ref.id(), s);
      } else {
        CLF_LOG_ERROR("lock session {} on server {} is lost (lease expired or server restarted)",
                      ref.id(), s);
        ss.announce_pending = true;
        ss.lost_ref = ref;
      }
    }
    stop_cv_.notify_all();
  }

  // ---- reclaim after a server restart
  // Tells server s that `previous` (a session of its previous incarnation) is
  // done reclaiming: reclaimed by `session`, or (null) it held nothing. A
  // server that is not in a grace period, or an older clfd, ignores or
  // refuses it; either way there is nothing more to do.
  void SendReclaimComplete(ServerId s, const v1::SessionRef& previous,
                           const v1::SessionRef* session) {
    v1::ReclaimCompleteRequest req;
    *req.mutable_previous() = previous;
    if (session != nullptr) *req.mutable_session() = *session;
    v1::ReclaimCompleteReply rep;
    grpc::ClientContext ctx;
    Prepare(&ctx, timeout_ms_);
    Status st = FromGrpc(stubs_[s]->ReclaimComplete(&ctx, req, &rep));
    if (st.ok() && rep.grace_ended()) {
      CLF_LOG_INFO("server {} ended its lock grace period: every session was done reclaiming", s);
    } else if (!st.ok()) {
      CLF_LOG_DEBUG("reclaim complete for session {} on server {}: {}", previous.id(), s,
                    st.ToString());
    }
  }

  bool HoldsOn(ServerId s) {
    std::lock_guard<std::mutex> l(track_mu_);
    for (const auto& [k, t] : lists_) {
      if (t.server == s) return true;
    }
    for (const auto& [k, o] : posix_) {
      if (ServerOf(k.first) == s) return true;
    }
    return false;
  }

  void DropTracked(ServerId s, const std::string& why) {
    std::lock_guard<std::mutex> l(track_mu_);
    size_t n = 0;
    for (auto it = lists_.begin(); it != lists_.end();) {
      if (it->second.server == s) {
        it = lists_.erase(it);
        ++n;
      } else {
        ++it;
      }
    }
    for (auto it = posix_.begin(); it != posix_.end();) {
      if (ServerOf(it->first.first) == s) {
        it = posix_.erase(it);
        ++n;
      } else {
        ++it;
      }
    }
    if (n > 0) CLF_LOG_ERROR("{} lock(s) on server {} are lost: {}", n, s, why);
  }

  // Runs on the renewal thread: opens a session that reclaims the lost one and
  // re-acquires every tracked lock of server s, then lets the queued calls go.
  void Reclaim(ServerId s) {
    ServerSession& ss = *sessions_[s];
    v1::SessionRef old;
    {
      std::lock_guard<std::mutex> l(ss.mu);
      if (ss.open || !ss.reclaim_pending) return;
      ss.opening = true;
      ss.reclaiming = true;
      old = ss.lost_ref;
    }
    v1::OpenSessionRequest oreq;
    oreq.set_lease_ms(opts_.lease_ms);
    oreq.set_client_name(opts_.client_name);
    *oreq.mutable_reclaim() = old;
    v1::OpenSessionReply orep;
    grpc::ClientContext octx;
    Prepare(&octx, timeout_ms_);
    Status st = FromGrpc(stubs_[s]->OpenSession(&octx, oreq, &orep));
    std::vector<std::function<void(Status, v1::SessionRef)>> waiters;
    if (!st.ok()) {
      {
        std::lock_guard<std::mutex> l(ss.mu);
        ss.opening = false;
        ss.reclaiming = false;
        ss.retry_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
        waiters.swap(ss.waiters);
      }
      for (auto& w : waiters)
        w(st.WithContext("reopen lock session on server " + std::to_string(s)), {});
      return;
    }
    const v1::SessionRef ref = orep.session();
    if (!orep.reclaim()) {
      DropTracked(s,
                  "the server refused the reclaim (its grace period is over, or the lease "
                  "expired without a restart)");
    } else {
      size_t ok = 0, failed = 0;
      ReclaimLists(s, ref, &ok, &failed);
      ReclaimPosix(s, ref, &ok, &failed);
      CLF_LOG_WARN(
          "lock session {} on server {} reclaimed {} lock(s) of session {} ({} failed, "
          "grace period {} ms left)",
          ref.id(), s, ok, old.id(), failed, orep.grace_ms_left());
    }
    {
      std::lock_guard<std::mutex> l(ss.mu);
      ss.open = true;
      ss.ref = ref;
      ss.lease_ms = orep.lease_ms();
      ss.renewed = std::chrono::steady_clock::now();
      ss.opening = false;
      ss.reclaiming = false;
      ss.reclaim_pending = false;
      waiters.swap(ss.waiters);
    }
    for (auto& w : waiters) w(Status::Ok(), ref);
    // Done: the server may end its grace period once every old session is.
    if (orep.reclaim()) SendReclaimComplete(s, old, &ref);
  }

  void ReclaimLists(ServerId s, const v1::SessionRef& ref, size_t* ok, size_t* failed) {
    std::vector<std::pair<ListKey, v1::AcquireRequest>> todo;
    {
      std::lock_guard<std::mutex> l(track_mu_);
      for (const auto& [k, t] : lists_) {
        if (t.server == s) todo.emplace_back(k, t.req);
      }
    }
    for (auto& [key, req] : todo) {
      *req.mutable_session() = ref;
      req.set_wait(false);
      req.set_wait_ms(0);
      req.set_reclaim(true);
      grpc::ClientContext ctx;
      Prepare(&ctx, timeout_ms_);
      v1::AcquireReply rep;
      Status st = FromGrpc(stubs_[s]->Acquire(&ctx, req, &rep));
      bool orphan = false;
      {
        std::lock_guard<std::mutex> l(track_mu_);
        auto it = lists_.find(key);
        if (!st.ok()) {
          if (it != lists_.end()) lists_.erase(it);
        } else if (it == lists_.end()) {
          orphan = true;  // unlocked while we reclaimed it
        } else {
          it->second.id = rep.lock_id();
          it->second.session = ref.id();
          it->second.epoch = ref.epoch();
        }
      }
      if (!st.ok()) {
        ++*failed;
        CLF_LOG_ERROR("reclaim of lock {} of {:#x} on server {} failed: {}: the lock is lost",
                      std::get<1>(key), std::get<0>(key), s, st.ToString());
        continue;
      }
      ++*ok;
      if (orphan) {
        v1::ReleaseRequest rr;
        *rr.mutable_session() = ref;
        rr.set_lock_id(rep.lock_id());
        grpc::ClientContext rctx;
        Prepare(&rctx, timeout_ms_);
        v1::ReleaseReply rrep;
        FromGrpc(stubs_[s]->Release(&rctx, rr, &rrep)).IgnoreError();
      }
    }
  }

  void ReclaimPosix(ServerId s, const v1::SessionRef& ref, size_t* ok, size_t* failed) {
    std::vector<std::pair<std::pair<Handle, uint64_t>, PosixOwnerState>> todo;
    {
      std::lock_guard<std::mutex> l(track_mu_);
      for (const auto& [k, o] : posix_) {
        if (ServerOf(k.first) == s) todo.emplace_back(k, o);
      }
    }
    auto send = [&](Handle h, uint64_t owner, v1::PosixOp op, uint64_t start, uint64_t end,
                    uint32_t pid) {
      v1::PosixLockRequest r;
      *r.mutable_session() = ref;
      r.set_handle(h);
      r.set_owner(owner);
      r.set_op(op);
      r.set_start(start);
      r.set_length(end == UINT64_MAX ? 0 : end - start);
      r.set_pid(pid);
      r.set_reclaim(true);
      grpc::ClientContext ctx;
      Prepare(&ctx, timeout_ms_);
      v1::PosixLockReply rep;
      Status st = FromGrpc(stubs_[s]->PosixLock(&ctx, r, &rep));
      if (st.ok()) {
        ++*ok;
      } else {
        ++*failed;
        CLF_LOG_ERROR("reclaim of a POSIX lock of {:#x} (owner {:#x}) on server {} failed: {}", h,
                      owner, s, st.ToString());
      }
      return st.ok();
    };
    for (auto& [key, o] : todo) {
      bool all = true;
      for (const auto& [start, seg] : o.ranges) {
        all = send(key.first, key.second, seg.op, start, seg.end, o.pid) && all;
      }
      if (o.flock) all = send(key.first, key.second, *o.flock, 0, UINT64_MAX, o.pid) && all;
      if (!all) {
        std::lock_guard<std::mutex> l(track_mu_);
        posix_.erase(key);  // partly reclaimed: what failed is lost; forget the rest too
      }
    }
  }

  void TrackPosix(const v1::PosixLockRequest& r) {
    std::lock_guard<std::mutex> l(track_mu_);
    const auto key = std::make_pair(Handle(r.handle()), r.owner());
    PosixOwnerState& o = posix_[key];
    if (r.op() != v1::POSIX_UNLOCK && r.op() != v1::FLOCK_UNLOCK && r.pid() != 0) o.pid = r.pid();
    switch (r.op()) {
      case v1::FLOCK_SHARED:
      case v1::FLOCK_EXCLUSIVE:
        o.flock = r.op();
        break;
      case v1::FLOCK_UNLOCK:
        o.flock.reset();
        break;
      default: {
        const uint64_t end = r.length() == 0 ? UINT64_MAX : r.start() + r.length();
        ApplyRange(&o.ranges, r.start(), end, r.op());
      }
    }
    if (o.ranges.empty() && !o.flock) posix_.erase(key);
  }

  void UntrackPosix(Handle h, const std::vector<uint64_t>& owners, bool flock) {
    std::lock_guard<std::mutex> l(track_mu_);
    for (uint64_t owner : owners) {
      auto it = posix_.find({h, owner});
      if (it == posix_.end()) continue;
      it->second.ranges.clear();
      if (flock) it->second.flock.reset();
      if (!it->second.flock) posix_.erase(it);
    }
  }

  void RenewLoop() {
    std::unique_lock<std::mutex> l(stop_mu_);
    while (!stop_) {
      stop_cv_.wait_for(l, std::chrono::milliseconds(50));
      if (stop_) break;
      l.unlock();
      for (ServerId s = 0; s < sessions_.size(); ++s) {
        ServerSession& ss = *sessions_[s];
        v1::SessionRef ref;
        uint32_t lease;
        bool reclaim;
        {
          std::lock_guard<std::mutex> sl(ss.mu);
          reclaim = ss.reclaim_pending && !ss.open && !(ss.opening && !ss.reclaiming) &&
                    std::chrono::steady_clock::now() >= ss.retry_at;
        }
        if (reclaim) {
          Reclaim(s);
          continue;
        }
        {
          v1::SessionRef announce;
          {
            std::lock_guard<std::mutex> sl(ss.mu);
            if (ss.announce_pending) announce = ss.lost_ref;
            ss.announce_pending = false;
          }
          if (announce.id() != 0) SendReclaimComplete(s, announce, nullptr);
        }
        {
          std::lock_guard<std::mutex> sl(ss.mu);
          if (!ss.open) continue;
          if (std::chrono::steady_clock::now() - ss.renewed < std::chrono::milliseconds(ss.lease_ms / 3)) {
            continue;
          }
          ref = ss.ref;
          lease = ss.lease_ms;
        }
        grpc::ClientContext ctx;
        Prepare(&ctx, std::max<uint32_t>(100, std::min<uint32_t>(timeout_ms_, lease / 3)));
        v1::SessionRequest req;
        *req.mutable_session() = ref;
        v1::SessionReply rep;
        Status st = FromGrpc(stubs_[s]->RenewSession(&ctx, req, &rep));
        if (st.ok()) {
          std::lock_guard<std::mutex> sl(ss.mu);
          if (ss.open && ss.ref.id() == ref.id()) ss.renewed = std::chrono::steady_clock::now();
        } else if (st.code() == Code::kStale) {
          Lost(s, ref);
        } else {
          {
            // Try again after a sixth of the lease (at most 1 s: a restarted
            // server is then noticed early in its grace period), not at every tick.
            std::lock_guard<std::mutex> sl(ss.mu);
            if (ss.open && ss.ref.id() == ref.id()) {
              ss.renewed = std::chrono::steady_clock::now() - std::chrono::milliseconds(lease / 3) +
                           std::chrono::milliseconds(std::min<uint32_t>(lease / 6, 1000));
            }
          }
          CLF_LOG_WARN("lock lease renewal on server {} failed: {}", s, st.ToString());
        }
      }
      l.lock();
    }
  }

  size_t open_sessions() const override {
    size_t n = 0;
    for (const auto& ss : sessions_) {
      std::lock_guard<std::mutex> l(ss->mu);
      n += ss->open ? 1 : 0;
    }
    return n;
  }

  // ---- list locks
  Result<HeldLock> AcquireSync(Handle h, v1::AcquireRequest req, LockWait wait) {
    ServerId s;
    CLF_RETURN_IF_ERROR(Route(h, &s));
    req.set_handle(h);
    req.set_wait(wait.wait);
    const bool endless = wait.wait && wait.timeout_ms == 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait.timeout_ms);
    for (int stale_retries = 0;;) {
      CLF_ASSIGN_OR_RETURN(v1::SessionRef ref, SessionSync(s));
      *req.mutable_session() = ref;
      uint32_t wait_ms = 0;
      if (wait.wait) {
        if (endless) {
          wait_ms = kSliceMs;
        } else {
          auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          give_up - std::chrono::steady_clock::now()).count();
          wait_ms = static_cast<uint32_t>(std::max<int64_t>(1, left));
        }
      }
      req.set_wait_ms(wait_ms);
      grpc::ClientContext ctx;
      Prepare(&ctx, uint64_t{wait_ms} + timeout_ms_);
      v1::AcquireReply rep;
      Status st = FromGrpc(stubs_[s]->Acquire(&ctx, req, &rep));
      if (st.ok()) {
        HeldLock held{h, rep.lock_id(), ref.id(), ref.epoch()};
        std::lock_guard<std::mutex> l(track_mu_);
        lists_[ListKey{h, held.id, held.session, held.epoch}] =
            TrackedList{s, req, held.id, held.session, held.epoch};
        return held;
      }
      if (st.code() == Code::kStale && stale_retries++ == 0) {
        Lost(s, ref);  // nothing was held under the new request: ask again in a new session
        continue;
      }
      if (st.code() == Code::kTimedOut && endless) continue;
      return st;
    }
  }

  static v1::AcquireRequest Base(LockMode mode, uint64_t owner, v1::LockKind kind) {
    v1::AcquireRequest r;
    r.set_mode(ToProto(mode));
    r.set_owner(owner);
    r.set_kind(kind);
    return r;
  }

  Result<HeldLock> LockWholeFile(Handle h, LockMode mode, uint64_t owner, LockWait wait) override {
    return AcquireSync(h, Base(mode, owner, v1::LOCK_WHOLE_FILE), wait);
  }

  Result<HeldLock> LockRange(Handle h, uint64_t offset, uint64_t length, LockMode mode,
                             uint64_t owner, LockWait wait) override {
    v1::AcquireRequest r = Base(mode, owner, v1::LOCK_RANGE);
    r.mutable_range()->set_offset(offset);
    r.mutable_range()->set_length(length);
    return AcquireSync(h, std::move(r), wait);
  }

  static void AddExtents(const std::vector<LockExtent>& extents, v1::AcquireRequest* r) {
    r->mutable_extents()->Reserve(static_cast<int>(extents.size()));
    for (const LockExtent& e : extents) {
      v1::LockExtent* x = r->add_extents();
      x->set_offset(e.offset);
      x->set_length(e.length);
    }
  }

  Result<HeldLock> LockList(Handle h, const std::vector<LockExtent>& extents, LockMode mode,
                            uint64_t owner, LockWait wait) override {
    v1::AcquireRequest r = Base(mode, owner, v1::LOCK_LIST);
    AddExtents(extents, &r);
    return AcquireSync(h, std::move(r), wait);
  }

  Result<HeldLock> LockPattern(Handle h, const std::vector<LockPatternLevel>& pattern, LockMode mode,
                               uint64_t owner, LockWait wait) override {
    v1::AcquireRequest r = Base(mode, owner, v1::LOCK_PATTERN);
    for (const LockPatternLevel& l : pattern) {
      v1::StridedLevel* p = r.add_pattern();
      p->set_offset(l.offset);
      p->set_block_length(l.block_length);
      p->set_stride(l.stride);
      p->set_count(l.count);
    }
    return AcquireSync(h, std::move(r), wait);
  }

  Status Unlock(const HeldLock& lock) override {
    ServerId s;
    CLF_RETURN_IF_ERROR(Route(lock.handle, &s));
    v1::ReleaseRequest r;
    r.mutable_session()->set_id(lock.session);
    r.mutable_session()->set_epoch(lock.epoch);
    r.set_lock_id(lock.id);
    {
      // After a reclaim the server knows the lock under a new id and session.
      std::lock_guard<std::mutex> l(track_mu_);
      auto it = lists_.find(ListKey{lock.handle, lock.id, lock.session, lock.epoch});
      if (it != lists_.end()) {
        r.mutable_session()->set_id(it->second.session);
        r.mutable_session()->set_epoch(it->second.epoch);
        r.set_lock_id(it->second.id);
        lists_.erase(it);
      }
    }
    grpc::ClientContext ctx;
    Prepare(&ctx, timeout_ms_);
    v1::ReleaseReply rep;
    Status st = FromGrpc(stubs_[s]->Release(&ctx, r, &rep));
    if (st.code() == Code::kStale) Lost(s, r.session());
    return st;
  }

  Result<LockConflict> TestList(Handle h, const std::vector<LockExtent>& extents, LockMode mode,
                                uint64_t owner) override {
    ServerId s;
    CLF_RETURN_IF_ERROR(Route(h, &s));
    CLF_ASSIGN_OR_RETURN(v1::SessionRef ref, SessionSync(s));
    v1::AcquireRequest r = Base(mode, owner, v1::LOCK_LIST);
    AddExtents(extents, &r);
    r.set_handle(h);
    *r.mutable_session() = ref;
    grpc::ClientContext ctx;
    Prepare(&ctx, timeout_ms_);
    v1::TestReply rep;
    Status st = FromGrpc(stubs_[s]->Test(&ctx, r, &rep));
    if (!st.ok()) {
      if (st.code() == Code::kStale) Lost(s, ref);
      return st;
    }
    return FromProto(rep);
  }

  // ---- atomic mode
  Status AtomicWriteList(Client& client, Handle h, const Layout& layout,
                         const std::vector<LockExtent>& extents, const std::string& data,
                         uint64_t owner, LockWait wait) override {
    uint64_t total = 0;
    for (const LockExtent& e : extents) {
      if (e.length > kMaxFileSize || total > kMaxFileSize - e.length) return Invalid("extents too long");
      total += e.length;
    }
    if (total != data.size()) return Invalid("data size differs from the extents' total length");
    CLF_ASSIGN_OR_RETURN(HeldLock lock, LockList(h, extents, LockMode::kExclusive, owner, wait));
    // One data request per server with all of its pieces (Client::WriteList);
    // the lock is held until every server answered.
    Result<uint64_t> w = client.WriteListSync(h, layout, ToFileExtents(extents), data);
    Status u = Unlock(lock);
    if (!w.ok()) return w.status();
    return u;
  }

  Result<std::string> AtomicReadList(Client& client, Handle h, const Layout& layout,
                                     const std::vector<LockExtent>& extents, uint64_t owner,
                                     LockWait wait) override {
    uint64_t total = 0;
    for (const LockExtent& e : extents) {
      if (e.length > kMaxIoBytes || total > kMaxIoBytes - e.length) return Status(Code::kTooBig, "read larger than 64 MiB");
      total += e.length;
    }
    CLF_ASSIGN_OR_RETURN(HeldLock lock, LockList(h, extents, LockMode::kShared, owner, wait));
    Result<std::string> r = client.ReadListSync(h, layout, ToFileExtents(extents));
    Status u = Unlock(lock);
    if (!r.ok()) return r.status();
    if (!u.ok()) return u;
    return r;
  }

  static std::vector<FileExtent> ToFileExtents(const std::vector<LockExtent>& extents) {
    std::vector<FileExtent> out;
    out.reserve(extents.size());
    for (const LockExtent& e : extents) out.push_back(FileExtent{e.offset, e.length});
    return out;
  }

  // ---- POSIX locks
  // Sends `req` (session filled in here) and retries: once with a new session
  // after kStale (an unlock then succeeds: the locks are gone already), and
  // again after each slice of an endless wait.
  void PosixAttempt(ServerId s, std::shared_ptr<PendingCall> pending,
                    std::shared_ptr<v1::PosixLockRequest> req, bool endless, int stale_retries,
                    StatusCallback cb) {
    WithSession(s, [this, s, pending, req, endless, stale_retries, cb = std::move(cb)](
                       Status st, v1::SessionRef ref) mutable {
      if (!st.ok()) return cb(st);
      std::shared_ptr<grpc::ClientContext> ctx = pending->NextContext();
      if (!ctx) return cb(Status(Code::kCancelled, "lock request interrupted"));
      *req->mutable_session() = ref;
      Prepare(ctx.get(), uint64_t{req->wait() ? req->wait_ms() : 0} + timeout_ms_);
      auto rep = std::make_shared<v1::PosixLockReply>();
      stubs_[s]->async()->PosixLock(
          ctx.get(), req.get(), rep.get(),
          tsan::Handoff(rep.get(), [this, s, pending, req, endless, stale_retries, ref, ctx, rep,
                                    cb = std::move(cb)](grpc::Status gs) mutable {
            Status st = FromGrpc(gs);
            const bool unlock = req->op() == v1::POSIX_UNLOCK || req->op() == v1::FLOCK_UNLOCK;
            if (pending->cancelled() && !st.ok()) {
              return cb(Status(Code::kCancelled, "lock request interrupted"));
            }
            if (st.code() == Code::kStale) {
              Lost(s, ref);
              if (unlock) {
                TrackPosix(*req);
                return cb(Status::Ok());
              }
              if (stale_retries == 0) {
                return PosixAttempt(s, pending, req, endless, 1, std::move(cb));
              }
            }
            if (st.code() == Code::kTimedOut && endless) {
              return PosixAttempt(s, pending, req, endless, stale_retries, std::move(cb));
            }
            if (st.ok()) TrackPosix(*req);
            cb(st);
          }));
    });
  }

  std::shared_ptr<PendingLock> StartPosix(Handle h, v1::PosixLockRequest r, StatusCallback cb) {
    auto pending = std::make_shared<PendingCall>();
    ServerId s;
    if (Status st = Route(h, &s); !st.ok()) {
      cb(st);
      return pending;
    }
    r.set_handle(h);
    if (r.wait()) r.set_wait_ms(kSliceMs);
    auto req = std::make_shared<v1::PosixLockRequest>(std::move(r));
    PosixAttempt(s, pending, req, req->wait(), 0, std::move(cb));
    return pending;
  }

  std::shared_ptr<PendingLock> PosixLock(Handle h, uint64_t owner, PosixLockType type,
                                         uint64_t start, uint64_t length, bool wait, uint32_t pid,
                                         StatusCallback cb) override {
    v1::PosixLockRequest r;
    r.set_owner(owner);
    r.set_op(type == PosixLockType::kRead    ? v1::POSIX_READ
             : type == PosixLockType::kWrite ? v1::POSIX_WRITE
                                             : v1::POSIX_UNLOCK);
    r.set_start(start);
    r.set_length(length);
    r.set_wait(wait && type != PosixLockType::kUnlock);
    r.set_pid(pid);
    return StartPosix(h, std::move(r), std::move(cb));
  }

  std::shared_ptr<PendingLock> Flock(Handle h, uint64_t owner, FlockOp op, bool wait, uint32_t pid,
                                     StatusCallback cb) override {
    v1::PosixLockRequest r;
    r.set_owner(owner);
    r.set_op(op == FlockOp::kShared      ? v1::FLOCK_SHARED
             : op == FlockOp::kExclusive ? v1::FLOCK_EXCLUSIVE
                                         : v1::FLOCK_UNLOCK);
    r.set_wait(wait && op != FlockOp::kUnlock);
    r.set_pid(pid);
    return StartPosix(h, std::move(r), std::move(cb));
  }

  void PosixTest(Handle h, uint64_t owner, PosixLockType type, uint64_t start, uint64_t length,
                 Callback<LockConflict> cb) override {
    ServerId s;
    if (Status st = Route(h, &s); !st.ok()) return cb(st);
    if (type == PosixLockType::kUnlock) return cb(Invalid("F_GETLK probes a read or write lock"));
    WithSession(s, [this, s, h, owner, type, start, length, cb = std::move(cb)](
                       Status st, v1::SessionRef ref) mutable {
      if (!st.ok()) return cb(st);
      struct Call {
        grpc::ClientContext ctx;
        v1::PosixLockRequest req;
        v1::TestReply rep;
      };
      auto call = std::make_shared<Call>();
      Prepare(&call->ctx, timeout_ms_);
      *call->req.mutable_session() = ref;
      call->req.set_handle(h);
      call->req.set_owner(owner);
      call->req.set_op(type == PosixLockType::kWrite ? v1::POSIX_WRITE : v1::POSIX_READ);
      call->req.set_start(start);
      call->req.set_length(length);
      stubs_[s]->async()->PosixTest(
          &call->ctx, &call->req, &call->rep,
          tsan::Handoff(call.get(), [this, s, ref, call, cb = std::move(cb)](grpc::Status gs) {
            Status st = FromGrpc(gs);
            if (!st.ok()) {
              if (st.code() == Code::kStale) Lost(s, ref);
              return cb(st);
            }
            cb(FromProto(call->rep));
          }));
    });
  }

  void PosixRelease(Handle h, std::vector<uint64_t> owners, bool flock, StatusCallback cb) override {
    ServerId s;
    if (Status st = Route(h, &s); !st.ok()) return cb(st);
    {
      // No session yet: this client never locked on that server, nothing to release.
      ServerSession& ss = *sessions_[s];
      std::lock_guard<std::mutex> l(ss.mu);
      if (!ss.open && !ss.opening) return cb(Status::Ok());
    }
    WithSession(s, [this, s, h, owners = std::move(owners), flock, cb = std::move(cb)](
                       Status st, v1::SessionRef ref) mutable {
      if (!st.ok()) return cb(st);
      struct Call {
        grpc::ClientContext ctx;
        v1::PosixReleaseRequest req;
        v1::PosixReleaseReply rep;
      };
      auto call = std::make_shared<Call>();
      Prepare(&call->ctx, timeout_ms_);
      *call->req.mutable_session() = ref;
      call->req.set_handle(h);
      for (uint64_t o : owners) call->req.add_owners(o);
      call->req.set_flock(flock);
      stubs_[s]->async()->PosixRelease(&call->ctx, &call->req, &call->rep,
                                       tsan::Handoff(call.get(), [this, s, ref, call,
                                                                  cb = std::move(cb)](
                                                                     grpc::Status gs) {
                                         Status st = FromGrpc(gs);
                                         if (st.ok() || st.code() == Code::kStale) {
                                           UntrackPosix(call->req.handle(),
                                                        {call->req.owners().begin(),
                                                         call->req.owners().end()},
                                                        call->req.flock());
                                         }
                                         if (st.code() == Code::kStale) {
                                           Lost(s, ref);
                                           return cb(Status::Ok());  // gone with the session
                                         }
                                         cb(st);
                                       }));
    });
  }

  // ---- admin
  Result<LockListing> ListLocks(Handle h, ServerId server) override {
    ServerId s = server;
    if (h != 0) CLF_RETURN_IF_ERROR(Route(h, &s));
    if (s >= stubs_.size()) return Invalid("no such server");
    v1::ListLocksRequest r;
    r.set_handle(h);
    grpc::ClientContext ctx;
    Prepare(&ctx, timeout_ms_);
    v1::ListLocksReply rep;
    CLF_RETURN_IF_ERROR(FromGrpc(stubs_[s]->ListLocks(&ctx, r, &rep)));
    LockListing out;
    out.sessions = rep.sessions();
    for (const v1::LockHolder& x : rep.locks()) {
      LockHolderInfo i;
      i.handle = x.handle();
      i.session = x.session();
      i.client_name = x.client_name();
      i.client_address = x.client_address();
      i.owner = x.owner();
      i.kind = x.kind();
      i.mode = FromProto(x.mode());
      i.waiting = x.waiting();
      for (const v1::LockExtent& e : x.ranges()) i.ranges.push_back(LockExtent{e.offset(), e.length()});
      i.extent_count = x.extent_count();
      i.age_ms = x.age_ms();
      i.lock_id = x.lock_id();
      i.pid = x.pid();
      out.locks.push_back(std::move(i));
    }
    return out;
  }

 private:
  Credentials cred_;
  LockClientOptions opts_;
  uint32_t timeout_ms_ = 5000;
  std::vector<std::unique_ptr<v1::Lock::Stub>> stubs_;
  std::vector<std::unique_ptr<ServerSession>> sessions_;
  // Held locks, for reclaim. track_mu_ and a session's mu are never held together.
  using ListKey = std::tuple<Handle, uint64_t, uint64_t, uint64_t>;  // the HeldLock handed out
  std::mutex track_mu_;
  std::map<ListKey, TrackedList> lists_;
  std::map<std::pair<Handle, uint64_t>, PosixOwnerState> posix_;  // (handle, owner)
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread renewer_;
};

}  // namespace

Result<std::unique_ptr<LockClient>> LockClient::Open(const ClusterConfig& cluster,
                                                     LockClientOptions opts) {
  CLF_RETURN_IF_ERROR(cluster.Validate());
  CLF_ASSIGN_OR_RETURN(Credentials cred, LoadClientCredentials(cluster, opts.tls_cert, opts.tls_key,
                                                               opts.secret_file));
  return std::unique_ptr<LockClient>(new GrpcLockClient(cluster, std::move(cred), std::move(opts)));
}

}  // namespace clf::client
