#include "baseline_path.h"

#include <algorithm>
#include <chrono>

#include "common/layout.h"
#include "common/layout_proto.h"
#include "common/log.h"
#include "common/status_grpc.h"
#include "common/tsan.h"

namespace clf::client {

BaselinePath::BaselinePath(RpcChannel& rpc) : rpc_(rpc) {
  for (const auto& ch : rpc_.channels()) base_.push_back(v1::Baseline::NewStub(ch));
}

// One Baseline call on server `server` through the channel's Unary.
#define CLF_BASELINE_CALL(server, Method, ReqT, RespT, req, done)                 \
  rpc_.Unary<ReqT, RespT>(                                                        \
      [stub = base_[server].get()](grpc::ClientContext* ctx, ReqT* rq, RespT* rs, \
                                   std::function<void(grpc::Status)> cb) {        \
        stub->async()->Method(ctx, rq, rs, std::move(cb));                        \
      },                                                                          \
      std::move(req), std::function<void(Status, RespT&)>(done))

void BaselinePath::FanOut(
    const v1::Layout& layout,
    std::function<void(ServerId, grpc::ClientContext*, v1::ObjectReply*,
                       std::function<void(grpc::Status)>)>
        call,
    std::function<void(Status, std::vector<std::pair<ServerId, v1::ObjectReply>>)> done) {
  const std::vector<ServerId> servers = DataServers(FromProto(layout), rpc_.cluster().size());
  struct Gather {
    std::mutex mu;
    size_t pending = 0;
    Status first;
    std::vector<std::pair<ServerId, v1::ObjectReply>> replies;
    std::function<void(Status, std::vector<std::pair<ServerId, v1::ObjectReply>>)> done;
  };
  auto g = std::make_shared<Gather>();
  g->pending = servers.size();
  g->replies.resize(servers.size());
  g->done = std::move(done);
  if (servers.empty()) return g->done(Status::Ok(), {});
  for (size_t i = 0; i < servers.size(); ++i) {
    const ServerId d = servers[i];
    if (d >= base_.size()) {
      std::unique_lock<std::mutex> l(g->mu);
      if (g->first.ok())
        g->first = Status(Code::kStale, "layout names a server outside the cluster");
      if (--g->pending == 0) {
        l.unlock();
        g->done(g->first, std::move(g->replies));
      }
      continue;
    }
    rpc_.Unary<int, v1::ObjectReply>(
        [call, d](grpc::ClientContext* ctx, int*, v1::ObjectReply* rep,
                  std::function<void(grpc::Status)> cb) { call(d, ctx, rep, std::move(cb)); },
        0,
        std::function<void(Status, v1::ObjectReply&)>([g, i, d](Status st, v1::ObjectReply& rep) {
          std::unique_lock<std::mutex> l(g->mu);
          if (!st.ok() && g->first.ok()) {
            g->first = Status(st.code(), "data server " + std::to_string(d) + ": " + st.message());
          }
          g->replies[i] = {d, rep};
          if (--g->pending == 0) {
            l.unlock();
            g->done(g->first, std::move(g->replies));
          }
        }));
  }
}

void BaselinePath::Undo(const v1::Layout& layout, const v1::Capability& cap,
                        std::function<void()> then) {
  auto stubs = &base_;
  FanOut(
      layout,
      [stubs, cap](ServerId d, grpc::ClientContext* ctx, v1::ObjectReply* rep,
                   std::function<void(grpc::Status)> cb) {
        auto req = std::make_shared<v1::ObjectRequest>();
        *req->mutable_cap() = cap;
        (*stubs)[d]->async()->RemoveObject(
            ctx, req.get(), rep,
            tsan::Handoff(req.get(), [req, cb = std::move(cb)](grpc::Status s) { cb(s); }));
      },
      [handle = cap.handle(), then = std::move(then)](
          Status s, std::vector<std::pair<ServerId, v1::ObjectReply>>) {
        if (!s.ok()) {
          CLF_LOG_WARN(
              "create of {:x} failed and its objects could not all be removed ({}): "
              "clf fsck lists them",
              handle, s.ToString());
        }
        then();
      });
}

void BaselinePath::Create(ServerId s, v1::CreateRequest r,
                          std::function<void(Status, v1::AttrReply&)> done) {
  v1::ReserveRequest rr;
  rr.set_parent(r.parent());
  *rr.mutable_caller() = r.caller();
  auto create = std::make_shared<v1::CreateRequest>(std::move(r));
  auto fin = std::make_shared<std::function<void(Status, v1::AttrReply&)>>(std::move(done));
  CLF_BASELINE_CALL(
      s, Reserve, v1::ReserveRequest, v1::ReserveReply, rr,
      ([this, s, create, fin](Status st, v1::ReserveReply& res) {
        v1::AttrReply none;
        if (!st.ok()) return (*fin)(st, none);
        auto reserved = std::make_shared<v1::ReserveReply>(res);
        auto stubs = &base_;
        FanOut(
            reserved->layout(),
            [stubs, reserved](ServerId d, grpc::ClientContext* ctx, v1::ObjectReply* rep,
                              std::function<void(grpc::Status)> cb) {
              auto req = std::make_shared<v1::ObjectRequest>();
              *req->mutable_cap() = reserved->create();
              (*stubs)[d]->async()->CreateObject(
                  ctx, req.get(), rep,
                  tsan::Handoff(req.get(), [req, cb = std::move(cb)](grpc::Status x) { cb(x); }));
            },
            [this, s, create, fin, reserved](Status os,
                                             std::vector<std::pair<ServerId, v1::ObjectReply>>) {
              if (!os.ok()) {
                return Undo(reserved->layout(), reserved->undo(), [fin, os] {
                  v1::AttrReply none;
                  (*fin)(Status(os.code(), "create: " + os.message()), none);
                });
              }
              v1::CreateRequest cr = *create;
              cr.set_handle(reserved->handle());
              CLF_BASELINE_CALL(s, Create, v1::CreateRequest, v1::AttrReply, cr,
                                ([this, fin, reserved](Status cs, v1::AttrReply& rep) {
                                  // Not created (or an existing file returned): the new objects are
                                  // nobody's.
                                  if (!cs.ok() || rep.existed()) {
                                    auto kept = std::make_shared<v1::AttrReply>(rep);
                                    return Undo(reserved->layout(), reserved->undo(),
                                                [fin, cs, kept] { (*fin)(cs, *kept); });
                                  }
                                  (*fin)(cs, rep);
                                }));
            });
      }));
}

void BaselinePath::Remove(ServerId s, v1::RemoveRequest r,
                          std::function<void(Status, v1::RemoveReply&)> done) {
  auto fin = std::make_shared<std::function<void(Status, v1::RemoveReply&)>>(std::move(done));
  CLF_BASELINE_CALL(
      s, Unlink, v1::RemoveRequest, v1::UnlinkReply, r,
      ([this, fin](Status st, v1::UnlinkReply& rep) {
        auto removed = std::make_shared<v1::RemoveReply>(rep.remove());
        if (!st.ok() || !rep.destroyed()) return (*fin)(st, *removed);
        auto cap = std::make_shared<v1::Capability>(rep.cap());
        auto stubs = &base_;
        FanOut(
            rep.layout(),
            [stubs, cap](ServerId d, grpc::ClientContext* ctx, v1::ObjectReply* out,
                         std::function<void(grpc::Status)> cb) {
              auto req = std::make_shared<v1::ObjectRequest>();
              *req->mutable_cap() = *cap;
              (*stubs)[d]->async()->RemoveObject(
                  ctx, req.get(), out,
                  tsan::Handoff(req.get(), [req, cb = std::move(cb)](grpc::Status x) { cb(x); }));
            },
            [fin, removed, cap](Status os, std::vector<std::pair<ServerId, v1::ObjectReply>>) {
              // The name and the metadata are gone: the unlink happened. Objects
              // left behind are orphans `clf fsck --repair` removes.
              if (!os.ok()) {
                CLF_LOG_WARN("unlink: objects of {:x} not all removed ({}): clf fsck lists them",
                             cap->handle(), os.ToString());
              }
              (*fin)(Status::Ok(), *removed);
            });
      }));
}

void BaselinePath::GetAttr(ServerId s, v1::GetAttrRequest r,
                           std::function<void(Status, v1::AttrReply&)> done) {
  auto fin = std::make_shared<std::function<void(Status, v1::AttrReply&)>>(std::move(done));
  CLF_META_CALL(
      rpc_, s, GetAttr, v1::GetAttrRequest, v1::AttrReply, r,
      ([this, fin](Status st, v1::AttrReply& rep) {
        if (!st.ok() || rep.attr().type() != v1::FT_REGULAR) return (*fin)(st, rep);
        auto attr = std::make_shared<v1::AttrReply>(rep);
        const Handle h = rep.attr().handle();
        auto stubs = &base_;
        FanOut(
            rep.attr().layout(),
            [stubs, h](ServerId d, grpc::ClientContext* ctx, v1::ObjectReply* out,
                       std::function<void(grpc::Status)> cb) {
              auto req = std::make_shared<v1::StatObjectRequest>();
              req->set_handle(h);
              (*stubs)[d]->async()->StatObject(
                  ctx, req.get(), out,
                  tsan::Handoff(req.get(), [req, cb = std::move(cb)](grpc::Status x) { cb(x); }));
            },
            [this, fin, attr](Status os, std::vector<std::pair<ServerId, v1::ObjectReply>> reps) {
              if (!os.ok()) return (*fin)(Status(os.code(), "stat: " + os.message()), *attr);
              const Layout l = FromProto(attr->attr().layout());
              uint64_t end = attr->attr().size(), blocks = 0;
              for (const auto& [d, o] : reps) {
                end = std::max(end, LogicalEnd(l, rpc_.cluster().size(), d, o.size()));
                blocks += o.blocks();
              }
              attr->mutable_attr()->set_size(end);
              attr->mutable_attr()->set_blocks(blocks);
              (*fin)(Status::Ok(), *attr);
            });
      }));
}

#undef CLF_BASELINE_CALL

}  // namespace clf::client
