// libFuzzer harness: arbitrary bytes as a Meta request (first byte: which
// RPC), validated and served as MetaService would (server/service/services.cc).
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
  switch (data[0] % 15) {
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
  }
  return 0;
}
