// libFuzzer harness: arbitrary bytes as an Admin request (first byte: Status,
// ListObjects, RemoveObject, FsckScan or FsckRepair), validated and served as
// AdminService would (admin_service.cc, admin_fsck.cc).
#include "server/ops/admin_ops.h"
#include "server/ops/fsck_ops.h"
#include "test/fuzz/fuzz_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clf;
  using namespace clf::fuzz;
  if (size < 1) return 0;
  FuzzServer& s = Server();
  server::AdminOps admin(s.ops.get(), s.store.get(), s.objects.get(), nullptr);
  switch (data[0] % 5) {
    case 0: {
      v1::StatusRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      v1::StatusReply rep;
      admin.FillStatus(&rep);
      break;
    }
    case 1: {
      v1::ListObjectsRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      v1::ListObjectsReply rep;
      admin.ListObjects(&rep);
      break;
    }
    case 2: {
      v1::RemoveObjectRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      admin.RemoveObject(r.handle()).IgnoreError();
      break;
    }
    case 3: {
      v1::FsckScanRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      server::FsckOps fsck(s.ops.get(), s.store.get(), s.objects.get());
      Result<v1::FsckScanReply> page = fsck.Scan(r);
      // A page never holds more than was asked for.
      if (page.ok() && static_cast<uint32_t>(page->entries_size() + page->inodes_size() +
                                             page->handles_size()) > r.max()) {
        std::abort();
      }
      break;
    }
    case 4: {
      v1::FsckRepairRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      server::FsckOps fsck(s.ops.get(), s.store.get(), s.objects.get());
      fsck.Repair(r).IgnoreError();
      break;
    }
  }
  return 0;
}
