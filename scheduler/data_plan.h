// The data path's schedule (paper 000 on real requests): a client request
// [offset, offset + length) of a striped file is mapped to per-server pieces
// (common/layout.h), each server's pieces are cut into schedule blocks of b
// bytes (CutIntoScheduleBlocks: a block may span several stripe units of one
// server) and the blocks are put in the order of the client's policy
// (OrderBlocks: the same code the simulator runs). BlockWindow then issues
// them in that order with at most `window` outstanding.
// Pure code: no sockets, no threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/layout.h"
#include "common/sched_settings.h"

namespace clf::scheduler {

// One schedule block of a request: `pieces` are consecutive pieces (or parts
// of pieces) of one server's share of the request, in file order.
struct DataBlock {
  ServerId server = 0;
  std::vector<Piece> pieces;
  uint64_t bytes = 0;
};

// The blocks of [offset, offset + length) in send order. `block` is b in
// bytes (0: the layout's stripe size; capped at kMaxSchedBlock); `self` is the
// sender's rank (hash-IOS starts at server self mod n); `seed` drives
// random-IOS. An empty range gives no blocks.
std::vector<DataBlock> PlanDataBlocks(const Layout& layout, uint32_t n, uint64_t offset,
                                      uint64_t length, OrderPolicy policy, uint64_t block,
                                      uint32_t self, uint64_t seed);

// Issues `count` blocks in order with at most `window` (>= 1) outstanding.
// Not thread safe: the caller serializes Start and Finish.
class BlockWindow {
 public:
  BlockWindow(size_t count, uint32_t window) : count_(count), window_(window ? window : 1) {}
  // The next block to start now, if the window and the plan allow one.
  std::optional<size_t> Start() {
    if (next_ >= count_ || in_flight_ >= window_) return std::nullopt;
    ++in_flight_;
    return next_++;
  }
  // A started block finished. True when every block has finished.
  bool Finish() {
    --in_flight_;
    return ++finished_ == count_;
  }
  size_t in_flight() const { return in_flight_; }

 private:
  const size_t count_;
  const uint32_t window_;
  size_t next_ = 0;
  size_t in_flight_ = 0;
  size_t finished_ = 0;
};

}  // namespace clf::scheduler
