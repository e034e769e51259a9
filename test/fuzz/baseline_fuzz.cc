// libFuzzer harness: arbitrary bytes as a Baseline request (metadata_mode =
// "client"; first byte: which RPC), validated and served as BaselineService
// would (server/service/baseline_service.cc) on a client-mode server.
//
// The fuzzer cannot forge a capability's MAC or guess a reserved handle, so
// bit 3 of the first byte asks the harness for the valid part a real client
// would have: CreateObject/RemoveObject get their capability signed with the
// server's key (expiring in a minute), Create gets a handle from a Reserve in
// its parent first. Without the bit the request goes as fuzzed.
#include <chrono>

#include "server/ops/capability.h"
#include "test/fuzz/fuzz_server.h"

namespace {

uint64_t NowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

void Sign(clf::v1::Capability* cap) {
  cap->set_expires_ms(NowMs() + 60000);
  cap->set_mac(clf::server::CapabilityMac(clf::fuzz::kCapabilityKey, cap->handle(), cap->op(),
                                          cap->expires_ms()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clf;
  using namespace clf::fuzz;
  if (size < 1) return 0;
  FuzzServer& s = ClientModeServer();
  const bool help = (data[0] & 8) != 0;
  switch (data[0] % 8 % 6) {
    case 0: {
      v1::ReserveRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      Result<v1::ReserveReply> rep = s.client_mode->Reserve(r);
      // What Reserve signs, the data side accepts.
      if (rep.ok()) {
        v1::ObjectRequest o;
        *o.mutable_cap() = rep->create();
        if (!server::Validate(o, s.view).ok()) std::abort();
      }
      break;
    }
    case 1: {
      v1::CreateRequest r;
      if (!ParseRest(data, size, &r)) return 0;
      if (help) {
        v1::ReserveRequest q;
        q.set_parent(r.parent());
        *q.mutable_caller() = r.caller();
        if (!server::Validate(q, s.view).ok()) return 0;
        Result<v1::ReserveReply> rep = s.client_mode->Reserve(q);
        if (!rep.ok()) return 0;
        r.set_handle(rep->handle());
      }
      if (!server::ValidateBaselineCreate(r, s.view).ok()) return 0;
      v1::Attr parent;
      s.client_mode->Create(r, &parent).IgnoreError();
      break;
    }
    case 2: {
      v1::RemoveRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.client_mode->Unlink(r).IgnoreError();
      break;
    }
    case 3:
    case 4: {
      v1::ObjectRequest r;
      if (!ParseRest(data, size, &r)) return 0;
      const v1::CapOp op = data[0] % 8 % 6 == 3 ? v1::CAP_CREATE : v1::CAP_REMOVE;
      if (help) {
        r.mutable_cap()->set_op(op);
        Sign(r.mutable_cap());
      }
      if (!server::Validate(r, s.view).ok()) return 0;
      s.client_mode->Object(r, op).IgnoreError();
      break;
    }
    case 5: {
      v1::StatObjectRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.client_mode->StatObject(r.handle()).IgnoreError();
      break;
    }
  }
  return 0;
}
