// libFuzzer harness: arbitrary bytes as a Peer request (first byte: which
// RPC), validated and served as PeerService would.
#include "test/fuzz/fuzz_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clf;
  using namespace clf::fuzz;
  if (size < 1) return 0;
  FuzzServer& s = Server();
  switch (data[0] % 6) {
    case 0: {
      v1::CollectiveRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      // One server: the whole collective is local and `done` runs before RunCollective returns.
      bool done = false;
      s.ops->RunCollective(r, [&done](v1::CollectiveReply) { done = true; });
      if (!done) std::abort();
      break;
    }
    case 1: {
      v1::MakeDirRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.ops->PeerMakeDir(r).IgnoreError();
      break;
    }
    case 2: {
      v1::RemoveDirRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.ops->PeerRemoveDir(r.handle()).IgnoreError();
      break;
    }
    case 3: {
      v1::AdjustLinkRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.ops->PeerAdjustLink(r).IgnoreError();
      break;
    }
    case 4: {
      v1::GetAttrsRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      std::vector<Handle> hs(r.handles().begin(), r.handles().end());
      s.ops->PeerGetAttrs(hs).IgnoreError();
      break;
    }
    case 5: {
      v1::InsertEntryRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.ops->PeerInsertEntry(r).IgnoreError();
      break;
    }
  }
  return 0;
}
