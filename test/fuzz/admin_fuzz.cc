// libFuzzer harness: arbitrary bytes as an Admin request (first byte: Status,
// ListObjects or RemoveObject), validated and served as AdminService would.
#include "test/fuzz/fuzz_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clf;
  using namespace clf::fuzz;
  if (size < 1) return 0;
  FuzzServer& s = Server();
  switch (data[0] % 3) {
    case 0: {
      v1::StatusRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      (void)s.objects->Count();
      (void)s.store->ApproximateBytes();
      (void)s.ops->inode_count();
      break;
    }
    case 1: {
      v1::ListObjectsRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      (void)s.objects->List();
      (void)s.store->AllAttrHandles();
      (void)s.store->Orphans();
      break;
    }
    case 2: {
      v1::RemoveObjectRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.objects->Remove(r.handle()).IgnoreError();
      break;
    }
  }
  return 0;
}
