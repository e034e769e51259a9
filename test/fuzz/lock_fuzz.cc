// libFuzzer harness: arbitrary bytes as a sequence of Lock service calls
// (proto/clf/v1/lock.proto) served by a fresh LockOps (server/ops/lock_ops.*),
// as LockService would call it. LockOps validates its own requests (sessions,
// handles, modes, extents, patterns, owners): there is no validate.h entry.
//
// Input: byte 0, bit 0: start in a reclaim grace period (a lock state file
// says the previous incarnation, epoch kPrevEpoch, had sessions 1 and 2 open;
// sessions A and B reclaim them). Then records [selector][length][request];
// selector % 16 % 11 picks the RPC, selector / 16 % 4 binds the request's
// session reference: 0 as fuzzed, 1 session A, 2 session B, 3 session 1 of
// the previous incarnation (sessions have random epochs the fuzzer cannot
// guess). Blocking calls that still wait at the end are cancelled, as a
// client that went away is.
//
// Checked besides the sanitizers: every completion callback runs exactly once
// (the gRPC reactor finishes exactly once), and ListLocks agrees with counts().
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "server/ops/lock_ops.h"
#include "test/fuzz/fuzz_server.h"

namespace {

constexpr uint64_t kPrevEpoch = 0xaa;
constexpr size_t kMaxRecords = 64;

// The lock state file: fsynced at every session open, so on tmpfs when there
// is one (an ext4 fsync per call would cut the executions a hundredfold).
const std::string& StateFile() {
  static const std::string* path = [] {
    std::error_code ec;
    std::string dir =
        std::filesystem::is_directory("/dev/shm", ec) ? "/dev/shm" : clf::fuzz::Server().dir;
    auto* p = new std::string(dir + "/clf-lock-fuzz-" + std::to_string(::getpid()));
    std::atexit([] { std::remove(StateFile().c_str()); });
    return p;
  }();
  return *path;
}

struct Done {
  std::atomic<int> calls{0};
  void Ran() {
    if (calls.fetch_add(1) != 0) {
      std::fprintf(stderr, "fuzz: a lock completion ran twice\n");
      std::abort();
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clf;
  using namespace clf::fuzz;
  if (size < 1) return 0;
  const std::string& state_file = StateFile();
  const bool grace = (data[0] & 1) != 0;
  server::LockOpsOptions o;
  if (grace) {
    std::ofstream(state_file, std::ios::trunc) << "00000000000000aa used sessions 2 1 2\n";
    o.state_file = state_file;
    o.grace_ms = 3600000;
  }
  std::vector<std::shared_ptr<Done>> dones;
  std::vector<uint64_t> tokens;
  {
    server::LockOps ops(0, o);
    if (grace != ops.in_grace()) std::abort();
    v1::SessionRef a, b;
    for (int i = 0; i < 2; ++i) {
      v1::OpenSessionRequest q;
      q.set_lease_ms(600000);
      q.set_client_name(i == 0 ? "fuzz-a" : "fuzz-b");
      if (grace) {
        q.mutable_reclaim()->set_id(i + 1);
        q.mutable_reclaim()->set_epoch(kPrevEpoch);
      }
      Result<v1::OpenSessionReply> r = ops.OpenSession(q, "fuzz");
      if (!r.ok() || r->reclaim() != grace) std::abort();
      (i == 0 ? a : b) = r->session();
    }
    auto bind = [&](v1::SessionRef* ref, int how) {
      if (how == 1) *ref = a;
      if (how == 2) *ref = b;
      if (how == 3) {
        ref->set_id(1);
        ref->set_epoch(kPrevEpoch);
      }
    };
    size_t pos = 1;
    for (size_t n = 0; n < kMaxRecords && pos + 2 <= size; ++n) {
      const uint8_t sel = data[pos];
      const size_t len = std::min<size_t>(data[pos + 1], size - pos - 2);
      const uint8_t* msg = data + pos + 2;
      pos += 2 + len;
      const int how = sel / 16 % 4;
      switch (sel % 16 % 11) {
        case 0: {
          v1::OpenSessionRequest r;
          if (!r.ParseFromArray(msg, static_cast<int>(len))) break;
          bind(r.mutable_reclaim(), how);
          ops.OpenSession(r, "fuzz").status().IgnoreError();
          break;
        }
        case 1:
        case 2: {
          v1::SessionRequest r;
          if (!r.ParseFromArray(msg, static_cast<int>(len))) break;
          bind(r.mutable_session(), how);
          if (sel % 16 % 11 == 1) {
            ops.RenewSession(r.session()).status().IgnoreError();
          } else {
            ops.CloseSession(r.session()).IgnoreError();
          }
          break;
        }
        case 3: {
          v1::ReclaimCompleteRequest r;
          if (!r.ParseFromArray(msg, static_cast<int>(len))) break;
          if (how != 0) {
            bind(r.mutable_session(), how);
            r.mutable_previous()->set_id(how == 2 ? 2 : 1);
            r.mutable_previous()->set_epoch(kPrevEpoch);
          }
          ops.ReclaimComplete(r).status().IgnoreError();
          break;
        }
        case 4: {
          v1::AcquireRequest r;
          if (!r.ParseFromArray(msg, static_cast<int>(len))) break;
          bind(r.mutable_session(), how);
          auto d = std::make_shared<Done>();
          dones.push_back(d);
          tokens.push_back(ops.Acquire(r, [d](Result<uint64_t>) { d->Ran(); }));
          break;
        }
        case 5: {
          v1::ReleaseRequest r;
          if (!r.ParseFromArray(msg, static_cast<int>(len))) break;
          bind(r.mutable_session(), how);
          ops.Release(r).IgnoreError();
          break;
        }
        case 6: {
          v1::AcquireRequest r;
          if (!r.ParseFromArray(msg, static_cast<int>(len))) break;
          bind(r.mutable_session(), how);
          ops.Test(r).status().IgnoreError();
          break;
        }
        case 7: {
          v1::PosixLockRequest r;
          if (!r.ParseFromArray(msg, static_cast<int>(len))) break;
          bind(r.mutable_session(), how);
          auto d = std::make_shared<Done>();
          dones.push_back(d);
          tokens.push_back(ops.PosixLock(r, [d](Status) { d->Ran(); }));
          break;
        }
        case 8: {
          v1::PosixLockRequest r;
          if (!r.ParseFromArray(msg, static_cast<int>(len))) break;
          bind(r.mutable_session(), how);
          ops.PosixTest(r).status().IgnoreError();
          break;
        }
        case 9: {
          v1::PosixReleaseRequest r;
          if (!r.ParseFromArray(msg, static_cast<int>(len))) break;
          bind(r.mutable_session(), how);
          ops.PosixRelease(r).IgnoreError();
          break;
        }
        case 10: {
          v1::ListLocksRequest r;
          if (!r.ParseFromArray(msg, static_cast<int>(len))) break;
          // The timer thread may end a wait (its deadline) or a session (its
          // lease) meanwhile: compare only when nothing changed around the listing.
          server::LockOps::Counts before = ops.counts();
          v1::ListLocksReply all = ops.ListLocks(r.handle());
          server::LockOps::Counts c = ops.counts();
          const bool stable = before.granted == c.granted && before.waiting == c.waiting &&
                              before.sessions == c.sessions;
          if (stable && r.handle() == 0 &&
              static_cast<uint64_t>(all.locks_size()) != c.granted + c.waiting) {
            std::fprintf(stderr, "fuzz: ListLocks shows %d locks, counts() %llu + %llu\n",
                         all.locks_size(), static_cast<unsigned long long>(c.granted),
                         static_cast<unsigned long long>(c.waiting));
            std::abort();
          }
          break;
        }
      }
    }
    for (uint64_t t : tokens) {
      if (t != 0) ops.CancelWait(t);
    }
  }  // ~LockOps: the timer thread is joined, nothing runs any more
  for (const auto& d : dones) {
    if (d->calls.load() != 1) {
      std::fprintf(stderr, "fuzz: a lock completion ran %d times\n", d->calls.load());
      std::abort();
    }
  }
  return 0;
}
