// libFuzzer harness: arbitrary bytes as a Meta request (first byte: which
// RPC), validated and served as MetaService would (server/service/meta_service.cc).
// DirLease and Commit run for one client session (the session header of a
// real call); for Commit, bit 0 of data[0] / 17 first grants that session the
// leases on every directory its creates and unlinks name (else the commit
// meets whatever leases earlier inputs left), released again afterwards.
#include <vector>

#include "server/ops/lease_commit.h"
#include "test/fuzz/fuzz_server.h"

namespace clf::fuzz {
namespace {

template <typename Req, typename Fn>
void Run(const uint8_t* data, size_t size, Fn fn) {
  Req r;
  if (!ParseRest(data, size, &r)) return;
  FuzzServer& s = Server();
  if (!server::Validate(r, s.view).ok()) return;
  fn(s, r);
}

template <typename Fn>
void RunXattr(const uint8_t* data, size_t size, server::XattrCall call, Fn fn) {
  v1::XattrRequest r;
  if (!ParseRest(data, size, &r)) return;
  FuzzServer& s = Server();
  if (!server::Validate(r, call, s.view).ok()) return;
  fn(s, r);
}

}  // namespace
}  // namespace clf::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clf;
  using namespace clf::fuzz;
  if (size < 1) return 0;
  constexpr uint64_t kSession = 1;
  switch (data[0] % 17) {
    case 0:
      Run<v1::LookupRequest>(data, size, [](FuzzServer& s, const v1::LookupRequest& r) {
        v1::Attr a;
        s.ops->LookupLocal(r, &a).IgnoreError();
        s.ops->Lookup(r).IgnoreError();
      });
      break;
    case 1:
      Run<v1::GetAttrRequest>(data, size, [](FuzzServer& s, const v1::GetAttrRequest& r) {
        s.ops->GetAttrLocal(r.handle()).IgnoreError();
        s.ops->GetAttr(r.handle(), r.caller()).IgnoreError();
      });
      break;
    case 2:
      Run<v1::SetAttrRequest>(data, size, [](FuzzServer& s, const v1::SetAttrRequest& r) {
        s.ops->SetAttr(r).IgnoreError();
      });
      break;
    case 3:
      Run<v1::CreateRequest>(data, size, [](FuzzServer& s, const v1::CreateRequest& r) {
        v1::Attr parent;
        s.ops->Create(r, &parent).IgnoreError();
      });
      break;
    case 4:
      Run<v1::LinkRequest>(data, size, [](FuzzServer& s, const v1::LinkRequest& r) {
        v1::Attr parent;
        s.ops->Link(r, &parent).IgnoreError();
      });
      break;
    case 5:
      Run<v1::RemoveRequest>(data, size, [](FuzzServer& s, const v1::RemoveRequest& r) {
        s.ops->Remove(r).IgnoreError();
      });
      break;
    case 6:
      Run<v1::RenameRequest>(data, size, [](FuzzServer& s, const v1::RenameRequest& r) {
        s.ops->Rename(r).IgnoreError();
      });
      break;
    case 7:
      Run<v1::ReadDirRequest>(data, size, [](FuzzServer& s, const v1::ReadDirRequest& r) {
        s.ops->ReadDir(r).IgnoreError();
      });
      break;
    case 8:
      Run<v1::GetAttrRequest>(data, size, [](FuzzServer& s, const v1::GetAttrRequest& r) {
        s.ops->Readlink(r.handle()).IgnoreError();
      });
      break;
    case 9:
      RunXattr(data, size, server::XattrCall::kGet,
               [](FuzzServer& s, const v1::XattrRequest& r) { s.ops->GetXattr(r).IgnoreError(); });
      break;
    case 10:
      RunXattr(data, size, server::XattrCall::kSet,
               [](FuzzServer& s, const v1::XattrRequest& r) { s.ops->SetXattr(r).IgnoreError(); });
      break;
    case 11:
      RunXattr(data, size, server::XattrCall::kList,
               [](FuzzServer& s, const v1::XattrRequest& r) { s.ops->ListXattr(r).IgnoreError(); });
      break;
    case 12:
      RunXattr(
          data, size, server::XattrCall::kRemove,
          [](FuzzServer& s, const v1::XattrRequest& r) { s.ops->RemoveXattr(r).IgnoreError(); });
      break;
    case 13:
      Run<v1::DestroyRequest>(data, size, [](FuzzServer& s, const v1::DestroyRequest& r) {
        s.ops->Destroy(r.handle()).IgnoreError();
      });
      break;
    case 14:
      Run<v1::ReportWriteRequest>(data, size, [](FuzzServer& s, const v1::ReportWriteRequest& r) {
        s.ops->ReportWrite(r).IgnoreError();
      });
      break;
    case 15:
      // As MetaService::DirLease after its lease checks (leases on, onehop, no root_squash).
      Run<v1::DirLeaseRequest>(data, size, [](FuzzServer& s, const v1::DirLeaseRequest& r) {
        if (r.op() == v1::DirLeaseRequest::RELEASE) return s.leases->Release(kSession, r.dir());
        if (r.op() == v1::DirLeaseRequest::END_SESSION) return s.leases->EndSession(kSession);
        if (!s.leases->Acquire(kSession, r.dir())) return;
        Result<v1::DirLeaseReply> l =
            s.ops->LeaseListing(r.dir(), r.caller(), server::kMaxLeaseEntries, r.with_attrs());
        if (!l.ok()) return s.leases->Release(kSession, r.dir());
        if (r.handles_wanted() > 0) (void)s.ops->ReserveHandles(r.handles_wanted());
      });
      break;
    case 16: {
      const bool grant = (data[0] / 17) & 1;
      Run<v1::CommitRequest>(data, size, [grant](FuzzServer& s, const v1::CommitRequest& r) {
        std::vector<Handle> granted;
        if (grant) {
          for (const v1::CommitOp& op : r.ops()) {
            Handle dir = op.has_create()   ? op.create().parent()
                         : op.has_remove() ? op.remove().parent()
                                           : 0;
            if (dir != 0 && s.leases->Acquire(kSession, dir)) granted.push_back(dir);
          }
        }
        v1::CommitReply reply;
        Status st = server::RunCommit(s.ops.get(), s.leases.get(), kSession, r, &reply);
        // One result per op, whatever happened to each.
        if (st.ok() && reply.code_size() != r.ops_size()) std::abort();
        for (Handle d : granted) s.leases->Release(kSession, d);
      });
      break;
    }
  }
  return 0;
}
