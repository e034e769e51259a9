// libFuzzer harness: arbitrary bytes as a Data request (first byte: Write,
// Read or Sync), validated and served as DataService would.
#include "test/fuzz/fuzz_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clf;
  using namespace clf::fuzz;
  if (size < 1) return 0;
  FuzzServer& s = Server();
  switch (data[0] % 3) {
    case 0: {
      v1::WriteRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.data->Write(r).IgnoreError();
      break;
    }
    case 1: {
      v1::ReadRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.data->Read(r).IgnoreError();
      break;
    }
    case 2: {
      v1::SyncRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.data->Sync(r.handle()).IgnoreError();
      break;
    }
  }
  return 0;
}
