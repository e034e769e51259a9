#include "tools/bench/locks/workloads.h"

#include <algorithm>
#include <functional>

#include "common/status.h"

namespace clf::tools::bench {
namespace {

using locking::StridedLevel;
using locking::StridedPattern;

ClientAccess FromPattern(std::vector<StridedLevel> levels) {
  Result<StridedPattern> p = StridedPattern::Make(std::move(levels));
  CLF_CHECK(p.ok());
  Result<locking::ExtentList> e = p->Expand(size_t{1} << 24);
  CLF_CHECK(e.ok());
  uint64_t bytes = e->TotalBytes();
  return ClientAccess{std::move(*e), std::move(*p), bytes};
}

// Start and size of part `i` of `n` split into `k` nearly equal parts.
void Part(uint64_t n, uint64_t k, uint64_t i, uint64_t* start, uint64_t* size) {
  uint64_t base = n / k, extra = n % k;
  *start = i * base + std::min(i, extra);
  *size = base + (i < extra ? 1 : 0);
}

Workload Grid(int clients, uint64_t kz, uint64_t ky, uint64_t kx) {
  const uint64_t n = 100, elem = 4;
  Workload w{"3d-block", clients, 1, n * n * n * elem, {}};
  for (uint64_t i = 0; i < kz; ++i) {
    for (uint64_t j = 0; j < ky; ++j) {
      for (uint64_t l = 0; l < kx; ++l) {
        uint64_t z0, nz, y0, ny, x0, nx;
        Part(n, kz, i, &z0, &nz);
        Part(n, ky, j, &y0, &ny);
        Part(n, kx, l, &x0, &nx);
        w.access.push_back(FromPattern({{(z0 * n * n + y0 * n + x0) * elem, 1, n * n * elem, nz},
                                        {0, 1, n * elem, ny},
                                        {0, nx * elem, nx * elem, 1}}));
      }
    }
  }
  return w;
}

}  // namespace

Workload ThreeDBlock(int clients) {
  uint64_t k = 1;
  while ((k + 1) * (k + 1) * (k + 1) <= static_cast<uint64_t>(clients)) ++k;
  CLF_CHECK(k * k * k == static_cast<uint64_t>(clients));
  return Grid(clients, k, k, k);
}

Workload ThreeDBlockDims(int clients) {
  CLF_CHECK(clients >= 1);
  // Prime factors, largest first, each multiplied into the smallest dimension.
  std::vector<uint64_t> factors;
  uint64_t c = static_cast<uint64_t>(clients);
  for (uint64_t p = 2; p * p <= c; ++p) {
    while (c % p == 0) {
      factors.push_back(p);
      c /= p;
    }
  }
  if (c > 1) factors.push_back(c);
  uint64_t dims[3] = {1, 1, 1};
  for (auto it = factors.rbegin(); it != factors.rend(); ++it) {
    *std::min_element(dims, dims + 3) *= *it;
  }
  std::sort(dims, dims + 3, std::greater<uint64_t>());
  return Grid(clients, dims[0], dims[1], dims[2]);
}

Workload Flash(int clients) {
  const uint64_t blocks = 80, vars = 24, block_bytes = 8 * 8 * 8 * 8;
  const uint64_t p = static_cast<uint64_t>(clients);
  Workload w{"flash", clients, 1, vars * blocks * p * block_bytes, {}};
  for (uint64_t c = 0; c < p; ++c) {
    w.access.push_back(FromPattern({{c * block_bytes, 1, blocks * p * block_bytes, vars},
                                    {0, block_bytes, p * block_bytes, blocks}}));
  }
  return w;
}

Workload TileReader(int frames) {
  const uint64_t tw = 1024, th = 768, px = 3, ox = 270, oy = 128;
  const uint64_t fw = 3 * tw - 2 * ox, fh = 2 * th - oy;
  Workload w{"tile", 6, frames, fw * fh * px, {}};
  for (uint64_t row = 0; row < 2; ++row) {
    for (uint64_t col = 0; col < 3; ++col) {
      uint64_t x0 = col * (tw - ox), y0 = row * (th - oy);
      w.access.push_back(FromPattern({{(y0 * fw + x0) * px, tw * px, fw * px, th}}));
    }
  }
  return w;
}

}  // namespace clf::tools::bench
