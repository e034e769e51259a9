#include "scheduler/data_plan.h"

#include <algorithm>
#include <map>

#include "scheduler/order_policy.h"

namespace clf::scheduler {

std::vector<DataBlock> PlanDataBlocks(const Layout& layout, uint32_t n, uint64_t offset,
                                      uint64_t length, OrderPolicy policy, uint64_t block,
                                      uint32_t self, uint64_t seed) {
  std::vector<Piece> pieces = MapRange(layout, n, offset, length);
  if (pieces.empty()) return {};
  if (block == 0) block = layout.stripe_size;
  block = std::min<uint64_t>(block, kMaxSchedBlock);
  // Each server's pieces in file order (MapRange returns them so).
  std::map<ServerId, std::vector<const Piece*>> by_server;
  std::vector<PeerExtent> extents;
  extents.reserve(pieces.size());
  for (const Piece& p : pieces) {
    by_server[p.server].push_back(&p);
    extents.push_back(PeerExtent{static_cast<int>(p.server), static_cast<int64_t>(p.logical_offset),
                                 static_cast<int64_t>(p.length)});
  }
  const std::vector<ScheduleBlock> blocks =
      CutIntoScheduleBlocks(std::move(extents), static_cast<int64_t>(block));
  const std::vector<int> order =
      OrderBlocks(policy, static_cast<int>(self % n), static_cast<int>(n), blocks, seed);

  // A block is bytes [stream_offset, stream_offset + bytes) of its server's
  // pieces concatenated. `blocks` holds each server's blocks in stream order,
  // so one cursor per server walks its pieces once.
  struct Cursor {
    size_t piece = 0;
    uint64_t skip = 0;  // bytes of ps[piece] already in earlier blocks
  };
  std::map<ServerId, Cursor> cursors;
  std::vector<DataBlock> cut(blocks.size());
  for (size_t k = 0; k < blocks.size(); ++k) {
    const ScheduleBlock& sb = blocks[k];
    const ServerId server = static_cast<ServerId>(sb.peer);
    const std::vector<const Piece*>& ps = by_server[server];
    Cursor& c = cursors[server];
    DataBlock& db = cut[k];
    db.server = server;
    db.bytes = static_cast<uint64_t>(sb.bytes);
    uint64_t want = db.bytes;
    while (want > 0) {
      const Piece& p = *ps[c.piece];
      const uint64_t take = std::min(p.length - c.skip, want);
      db.pieces.push_back(
          Piece{p.server, p.local_offset + c.skip, take, p.logical_offset + c.skip});
      want -= take;
      c.skip += take;
      if (c.skip == p.length) {
        ++c.piece;
        c.skip = 0;
      }
    }
  }
  std::vector<DataBlock> out;
  out.reserve(order.size());
  for (int k : order) out.push_back(std::move(cut[static_cast<size_t>(k)]));
  return out;
}

}  // namespace clf::scheduler
