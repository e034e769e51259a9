// Randomized model check of LockTable against a brute-force byte map: each
// request is the set of bytes it covers (a 64-bit mask over a 64-byte file),
// and the model applies the fairness rule of lock_table.h literally.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "locking/lock_table.h"
#include "test/support/test_util.h"

namespace clf::locking {
namespace {

constexpr uint64_t kFileSize = 64;

struct ModelLock {
  Owner owner;
  LockMode mode;
  uint64_t mask;
  bool granted;
};

class Model {
 public:
  bool Conflict(const ModelLock& a, const ModelLock& b) const {
    return a.owner != b.owner && ModesConflict(a.mode, b.mode) && (a.mask & b.mask) != 0;
  }
  // Would `l` be granted now, given locks ordered before `before`?
  bool Blocked(const ModelLock& l, LockId before) const {
    for (const auto& [id, o] : locks) {
      if (o.granted ? Conflict(l, o) : (id < before && Conflict(l, o))) return true;
    }
    return false;
  }
  std::vector<LockId> Wake() {
    std::vector<LockId> woken;
    for (auto& [id, l] : locks) {
      if (!l.granted && !Blocked(l, id)) {
        l.granted = true;
        woken.push_back(id);
      }
    }
    return woken;
  }
  // Lock ids are handed out in arrival order, so id order is arrival order.
  std::map<LockId, ModelLock> locks;
};

uint64_t MaskOf(const ExtentList& l) {
  uint64_t m = 0;
  for (const Extent& e : l.extents()) {
    for (uint64_t b = e.offset; b < std::min(e.end(), kFileSize); ++b) m |= uint64_t{1} << b;
  }
  return m;
}

LockRequest RandomRequest(std::mt19937_64& rng, uint64_t* mask) {
  switch (rng() % 4) {
    case 0:
      *mask = ~uint64_t{0};
      return LockRequest::WholeFile();
    case 1: {
      uint64_t off = rng() % kFileSize;
      uint64_t len = 1 + rng() % std::min<uint64_t>(16, kFileSize - off);
      LockRequest r = LockRequest::Range(off, len);
      *mask = MaskOf(r.extents());
      return r;
    }
    case 2: {
      std::vector<Extent> ext;
      size_t n = 1 + rng() % 5;
      for (size_t i = 0; i < n; ++i) {
        uint64_t off = rng() % kFileSize;
        ext.push_back({off, 1 + rng() % std::min<uint64_t>(6, kFileSize - off)});
      }
      LockRequest r = LockRequest::List(*ExtentList::FromExtents(ext));
      *mask = MaskOf(r.extents());
      return r;
    }
    default: {
      for (;;) {
        StridedLevel outer{rng() % 8, 1, 8 + rng() % 16, 1 + rng() % 3};
        StridedLevel inner{rng() % 3, 1 + rng() % 3, 2 + rng() % 4, 1 + rng() % 3};
        Result<StridedPattern> p = StridedPattern::Make({outer, inner});
        if (!p.ok() || p->Bounds().end() > kFileSize) continue;
        *mask = MaskOf(*p->Expand(1000));
        return LockRequest::Pattern(*p);
      }
    }
  }
}

void CheckAgainstModel(const LockTable& t, const Model& m) {
  size_t granted = 0;
  for (const auto& [id, l] : m.locks) {
    ASSERT_EQ(t.IsGranted(id), l.granted) << "lock " << id;
    ASSERT_EQ(t.IsWaiting(id), !l.granted) << "lock " << id;
    granted += l.granted;
    if (!l.granted) continue;
    for (const auto& [id2, l2] : m.locks) {
      if (id2 != id && l2.granted) {
        ASSERT_FALSE(m.Conflict(l, l2)) << id << " vs " << id2;
      }
    }
  }
  ASSERT_EQ(t.granted_locks(), granted);
  ASSERT_EQ(t.waiting_requests(), m.locks.size() - granted);
}

struct Coverage {
  size_t queued = 0;
  size_t woken = 0;
  size_t try_refused = 0;
};

void RunSequence(uint64_t seed, int steps, Coverage* cov) {
  std::mt19937_64 rng(seed);
  LockTable t;
  Model m;
  LockId next = 1;
  const uint64_t kSessions = 4;
  for (int step = 0; step < steps; ++step) {
    int op = static_cast<int>(rng() % 10);
    std::vector<LockId> woken;
    if (op < 4 || m.locks.empty()) {  // blocking acquire
      Owner o{1 + rng() % kSessions, rng() % 2};
      LockMode mode = rng() % 2 ? LockMode::kExclusive : LockMode::kShared;
      uint64_t mask = 0;
      LockRequest r = RandomRequest(rng, &mask);
      ModelLock ml{o, mode, mask, false};
      ml.granted = !m.Blocked(ml, next);
      Result<AcquireOutcome> out = t.Acquire(next, o, mode, r);
      ASSERT_OK(out);
      ASSERT_EQ(*out == AcquireOutcome::kGranted, ml.granted) << "step " << step;
      cov->queued += !ml.granted;
      m.locks[next++] = ml;
    } else if (op < 6) {  // try
      Owner o{1 + rng() % kSessions, rng() % 2};
      LockMode mode = rng() % 2 ? LockMode::kExclusive : LockMode::kShared;
      uint64_t mask = 0;
      LockRequest r = RandomRequest(rng, &mask);
      ModelLock ml{o, mode, mask, true};
      bool ok = !m.Blocked(ml, next);
      Status s = t.TryAcquire(next, o, mode, r);
      ASSERT_EQ(s.ok(), ok) << "step " << step << ": " << s.ToString();
      if (ok) m.locks[next] = ml;
      cov->try_refused += !ok;
      if (!ok) {
        ASSERT_EQ(s.code(), Code::kWouldBlock);
      }
      ++next;
    } else if (op < 9) {  // release (granted) or cancel (waiting)
      auto it = m.locks.begin();
      std::advance(it, rng() % m.locks.size());
      LockId id = it->first;
      bool was_granted = it->second.granted;
      if (!was_granted && rng() % 2) {
        ASSERT_OK(t.Cancel(id, &woken));
      } else {
        ASSERT_OK(t.Release(id, &woken));
      }
      m.locks.erase(it);
      ASSERT_EQ(woken, m.Wake()) << "step " << step;
      cov->woken += woken.size();
    } else {  // a session's lease expires
      SessionId s = 1 + rng() % kSessions;
      std::vector<LockId> cancelled, want_cancelled;
      for (auto it = m.locks.begin(); it != m.locks.end();) {
        if (it->second.owner.session == s) {
          if (!it->second.granted) want_cancelled.push_back(it->first);
          it = m.locks.erase(it);
        } else {
          ++it;
        }
      }
      t.ReleaseSession(s, &woken, &cancelled);
      std::sort(cancelled.begin(), cancelled.end());
      ASSERT_EQ(cancelled, want_cancelled);
      ASSERT_EQ(woken, m.Wake()) << "step " << step;
    }
    CheckAgainstModel(t, m);
    if (::testing::Test::HasFatalFailure()) return;
  }
  ASSERT_TRUE(t.tree().CheckInvariants());
  // Drain: releasing granted locks in any order must eventually grant every
  // waiter (nobody starves).
  while (!m.locks.empty()) {
    auto it = std::find_if(m.locks.begin(), m.locks.end(),
                           [](const auto& p) { return p.second.granted; });
    ASSERT_NE(it, m.locks.end()) << "waiters left with nothing granted: starvation";
    std::vector<LockId> woken;
    ASSERT_OK(t.Release(it->first, &woken));
    m.locks.erase(it);
    ASSERT_EQ(woken, m.Wake());
    CheckAgainstModel(t, m);
  }
  ASSERT_TRUE(t.empty());
}

TEST(LockTableModelTest, RandomSequencesMatchByteMapModel) {
  Coverage cov;
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    RunSequence(seed, 300, &cov);
    if (HasFatalFailure()) {
      ADD_FAILURE() << "seed " << seed;
      return;
    }
  }
  // The sequences must actually exercise waiting and waking.
  EXPECT_GT(cov.queued, 10000u);
  EXPECT_GT(cov.woken, 10000u);
  EXPECT_GT(cov.try_refused, 10000u);
  std::printf("model check: %zu queued, %zu woken, %zu refused tries\n", cov.queued, cov.woken,
              cov.try_refused);
}

}  // namespace
}  // namespace clf::locking
