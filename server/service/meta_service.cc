// The Meta service: lookups, attributes, namespace changes, listings, leases, commits.
#include "server/service/services.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <charconv>
#include <future>
#include <string>
#include <string_view>

#include "common/log.h"
#include "common/status_grpc.h"
#include "common/tsan.h"
#include "common/version.h"
#include "server/ops/lease_commit.h"
#include "server/service/validate.h"

#include "server/service/serve.h"

namespace clf::server {

using namespace service_detail;  // NOLINT: the shared request boundary (serve.h)

grpc::ServerUnaryReactor* MetaService::Lookup(grpc::CallbackServerContext* ctx,
                                              const v1::LookupRequest* in, v1::AttrReply* resp) {
  const auto req = Squash(c_, in);
  auto* reactor = ctx->DefaultReactor();
  if (!Admit(c_, ctx, reactor, "Meta.Lookup", Validate(*req, View(c_)))) return reactor;
  auto once = std::make_shared<FinishOnce>(reactor);
  AfterLeases(c_, ctx, req->parent(), [this, req, resp, once] {
  GuardedAsync("Meta.Lookup", once, [this, req, resp, once] {
    // Inline: RocksDB reads, then the stat collective asynchronously. Only an
    // entry whose metadata lives on another server takes the executor.
    Result<bool> local = c_->ops->LookupLocal(*req, resp->mutable_attr());
    if (!local.ok()) {
      once->Finish(local.status());
    } else if (!*local) {
      c_->io->Submit([this, req, resp, once] {
        auto fn = [this, req, resp] {
          Result<v1::Attr> r = c_->ops->Lookup(*req);
          CopyAttrOut(r, resp->mutable_attr());
          return r.status();
        };
        once->Finish(Guarded("Meta.Lookup", fn));
      });
    } else {
      c_->ops->FillSizesAsync({resp->mutable_attr()}, [once](clf::Status s) { once->Finish(s); });
    }
    return clf::Status::Ok();
  });
  });
  return reactor;
}

grpc::ServerUnaryReactor* MetaService::GetAttr(grpc::CallbackServerContext* ctx,
                                               const v1::GetAttrRequest* in, v1::AttrReply* resp) {
  const auto req = Squash(c_, in);
  auto* reactor = ctx->DefaultReactor();
  if (!Admit(c_, ctx, reactor, "Meta.GetAttr", Validate(*req, View(c_)))) return reactor;
  auto once = std::make_shared<FinishOnce>(reactor);
  AfterLeases(c_, ctx, req->handle(), [this, req, resp, once] {
  GuardedAsync("Meta.GetAttr", once, [this, req, resp, once] {
    Result<v1::Attr> a = c_->ops->GetAttrLocal(req->handle());
    if (!a.ok()) {
      once->Finish(a.status());
      return clf::Status::Ok();
    }
    *resp->mutable_attr() = std::move(*a);
    c_->ops->FillSizesAsync({resp->mutable_attr()}, [once](clf::Status s) { once->Finish(s); });
    return clf::Status::Ok();
  });
  });
  return reactor;
}

grpc::ServerUnaryReactor* MetaService::SetAttr(grpc::CallbackServerContext* ctx,
                                               const v1::SetAttrRequest* in, v1::AttrReply* resp) {
  const auto req = Squash(c_, in);
  return ServeGated(c_, c_->io, ctx, "Meta.SetAttr", Validate(*req, View(c_)), {req->handle()}, true, [this, req, resp] {
    Result<v1::Attr> r = c_->ops->SetAttr(*req);
    CopyAttrOut(r, resp->mutable_attr());
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Create(grpc::CallbackServerContext* ctx,
                                              const v1::CreateRequest* in, v1::AttrReply* resp) {
  const auto req = Squash(c_, in);
  return ServeGated(c_, c_->io, ctx, "Meta.Create", Validate(*req, View(c_)), {req->parent()}, true, [this, req, resp] {
    bool existed = false;
    Result<v1::Attr> r = c_->ops->Create(*req, resp->mutable_parent(), &existed);
    CopyAttrOut(r, resp->mutable_attr());
    resp->set_existed(existed);
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Link(grpc::CallbackServerContext* ctx,
                                            const v1::LinkRequest* in, v1::AttrReply* resp) {
  const auto req = Squash(c_, in);
  return ServeGated(c_, c_->io, ctx, "Meta.Link", Validate(*req, View(c_)), {req->new_parent()}, true, [this, req, resp] {
    Result<v1::Attr> r = c_->ops->Link(*req, resp->mutable_parent());
    CopyAttrOut(r, resp->mutable_attr());
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Remove(grpc::CallbackServerContext* ctx,
                                              const v1::RemoveRequest* in, v1::RemoveReply* resp) {
  const auto req = Squash(c_, in);
  return ServeGated(c_, c_->io, ctx, "Meta.Remove", Validate(*req, View(c_)), {req->parent()}, true, [this, req, resp] {
    Result<v1::RemoveReply> r = c_->ops->Remove(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Rename(grpc::CallbackServerContext* ctx,
                                              const v1::RenameRequest* in, v1::RenameReply* resp) {
  const auto req = Squash(c_, in);
  const uint64_t session = SessionOf(ctx);
  return ServeGated(c_, c_->io, ctx, "Meta.Rename", Validate(*req, View(c_)), {req->src_parent(), req->dst_parent()}, true, [this, req, resp, session] {
    Result<v1::RenameReply> r = c_->ops->Rename(*req, session);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::ReadDir(grpc::CallbackServerContext* ctx,
                                               const v1::ReadDirRequest* in,
                                               v1::ReadDirReply* resp) {
  const auto req = Squash(c_, in);
  return ServeGated(c_, c_->io, ctx, "Meta.ReadDir", Validate(*req, View(c_)), {req->handle()}, false, [this, req, resp] {
    Result<v1::ReadDirReply> r = c_->ops->ReadDir(*req);
    if (r.ok()) *resp = std::move(*r);
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::Readlink(grpc::CallbackServerContext* ctx,
                                                const v1::GetAttrRequest* in,
                                                v1::ReadlinkReply* resp) {
  const auto req = Squash(c_, in);
  return ServeInline(c_, ctx, "Meta.Readlink", Validate(*req, View(c_)), [this, req, resp] {
    Result<std::string> r = c_->ops->Readlink(req->handle());
    if (r.ok()) resp->set_target(std::move(*r));
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::GetXattr(grpc::CallbackServerContext* ctx,
                                                const v1::XattrRequest* in, v1::XattrReply* resp) {
  const auto req = Squash(c_, in);
  return ServeInline(c_, ctx, "Meta.GetXattr", Validate(*req, XattrCall::kGet, View(c_)),
                     [this, req, resp] {
                       Result<std::string> r = c_->ops->GetXattr(*req);
                       if (r.ok()) resp->set_value(std::move(*r));
                       return r.status();
                     });
}

grpc::ServerUnaryReactor* MetaService::SetXattr(grpc::CallbackServerContext* ctx,
                                                const v1::XattrRequest* in, v1::XattrReply*) {
  const auto req = Squash(c_, in);
  return Serve(c_, c_->io, ctx, "Meta.SetXattr", Validate(*req, XattrCall::kSet, View(c_)),
               [this, req] { return c_->ops->SetXattr(*req); });
}

grpc::ServerUnaryReactor* MetaService::ListXattr(grpc::CallbackServerContext* ctx,
                                                 const v1::XattrRequest* in, v1::XattrReply* resp) {
  const auto req = Squash(c_, in);
  return ServeInline(c_, ctx, "Meta.ListXattr", Validate(*req, XattrCall::kList, View(c_)),
                     [this, req, resp] {
                       Result<std::vector<std::string>> r = c_->ops->ListXattr(*req);
                       if (r.ok()) {
                         for (std::string& n : *r) resp->add_names(std::move(n));
                       }
                       return r.status();
                     });
}

grpc::ServerUnaryReactor* MetaService::RemoveXattr(grpc::CallbackServerContext* ctx,
                                                   const v1::XattrRequest* in, v1::XattrReply*) {
  const auto req = Squash(c_, in);
  return Serve(c_, c_->io, ctx, "Meta.RemoveXattr", Validate(*req, XattrCall::kRemove, View(c_)),
               [this, req] { return c_->ops->RemoveXattr(*req); });
}

grpc::ServerUnaryReactor* MetaService::Destroy(grpc::CallbackServerContext* ctx,
                                               const v1::DestroyRequest* req, v1::DestroyReply*) {
  return Serve(c_, c_->io, ctx, "Meta.Destroy", Validate(*req, View(c_)),
               [this, req] { return c_->ops->Destroy(req->handle()); });
}

grpc::ServerUnaryReactor* MetaService::ReportWrite(grpc::CallbackServerContext* ctx,
                                                   const v1::ReportWriteRequest* in,
                                                   v1::AttrReply* resp) {
  const auto req = Squash(c_, in);
  return Serve(c_, c_->io, ctx, "Meta.ReportWrite", Validate(*req, View(c_)), [this, req, resp] {
    Result<v1::Attr> r = c_->ops->ReportWrite(*req);
    CopyAttrOut(r, resp->mutable_attr());
    return r.status();
  });
}

grpc::ServerUnaryReactor* MetaService::DirLease(grpc::CallbackServerContext* ctx,
                                                const v1::DirLeaseRequest* req,
                                                v1::DirLeaseReply* resp) {
  const uint64_t session = SessionOf(ctx);
  return Serve(c_, c_->io, ctx, "Meta.DirLease", Validate(*req, View(c_)), [this, req, resp, session] {
    DirLeases* leases = c_->leases;
    if (leases == nullptr) {
      resp->set_refused("directory leases are off (dir_lease_ms = 0)");
      return clf::Status::Ok();
    }
    if (req->op() == v1::DirLeaseRequest::RELEASE) {
      leases->Release(session, req->dir());
      return clf::Status::Ok();
    }
    if (req->op() == v1::DirLeaseRequest::END_SESSION) {
      leases->EndSession(session);
      return clf::Status::Ok();
    }
    if (session == 0) {
      resp->set_refused("no session");
      return clf::Status::Ok();
    }
    // Squashed callers and per-file collectives change what a create does on
    // the server: the client could not answer for it.
    if (c_->ops->cluster().root_squash) {
      resp->set_refused("root_squash is on");
      return clf::Status::Ok();
    }
    if (c_->ops->cluster().metadata_mode != MetadataMode::kOneHop) {
      resp->set_refused("metadata_mode is not onehop");
      return clf::Status::Ok();
    }
    if (!leases->Acquire(session, req->dir())) {
      resp->set_refused("another client holds or is changing the directory");
      return clf::Status::Ok();
    }
    Result<v1::DirLeaseReply> r = c_->ops->LeaseListing(req->dir(), req->caller(), kMaxLeaseEntries,
                                                                 req->with_attrs());
    if (!r.ok()) {
      leases->Release(session, req->dir());
      if (r.status().code() == Code::kNoSpace || r.status().code() == Code::kPermission) {
        resp->set_refused(r.status().message());
        return clf::Status::Ok();
      }
      return r.status();
    }
    *resp = std::move(*r);
    resp->set_granted(true);
    resp->set_lease_ms(leases->lease_ms());
    if (req->handles_wanted() > 0) {
      clf::Result<Handle> first = c_->ops->ReserveHandles(req->handles_wanted());
      if (!first.ok()) return first.status();
      resp->set_handle_first(*first);
      resp->set_handle_count(req->handles_wanted());
    }
    return clf::Status::Ok();
  });
}

grpc::ServerUnaryReactor* MetaService::LeaseEvents(grpc::CallbackServerContext* ctx,
                                                   const v1::LeaseEventsRequest* req,
                                                   v1::LeaseEventsReply* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (!Begin(c_, ctx, reactor, "Meta.LeaseEvents")) return reactor;
  const uint64_t session = SessionOf(ctx);
  if (session == 0 || c_->leases == nullptr) {
    reactor->Finish(ToGrpc(Invalid("lease events: no session, or leases are off")));
    return reactor;
  }
  const uint32_t wait_ms = std::min<uint32_t>(req->wait_ms(), 60000);
  c_->leases->WaitEvents(session, wait_ms, [reactor, resp](std::vector<Handle> recalled) {
    for (Handle h : recalled) resp->add_recall(h);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* MetaService::Commit(grpc::CallbackServerContext* ctx,
                                              const v1::CommitRequest* req, v1::CommitReply* resp) {
  const uint64_t session = SessionOf(ctx);
  return Serve(c_, c_->io, ctx, "Meta.Commit", Validate(*req, View(c_)), [this, req, resp, session] {
    return RunCommit(c_->ops, c_->leases, session, *req, resp);
  });
}

}  // namespace clf::server
