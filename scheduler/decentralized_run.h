// Executes decentralized orders (paper 000) in the one-transfer-at-a-time
// model and reports when every block ran.
//
// Model (our reading of paper 000 §2/§6 and §7's explanation of the read
// results): every sender walks its own ordered list of blocks; it issues a
// block to its receiver when its previous block has finished (one transfer at
// a time, a blocking send) and waits until the receiver has taken it. A
// receiver serves one block at a time, first come first served: the earliest
// issued block waiting for it, ties to the lower sender index ("an I/O server
// that receives the first request starts serving it"). Nothing is centrally
// coordinated. Pure function; thread safe.
#pragma once

#include <vector>

#include "scheduler/problem.h"

namespace clf::scheduler {

struct OutgoingBlock {
  int receiver = 0;
  Time size = 1;  // > 0
};

struct DecentralizedRun {
  // start[s][k]: when sender s's k-th block started.
  std::vector<std::vector<Time>> start;
  Time length = 0;  // finish of the last block
};

// `sequences[s]` is sender s's blocks in sending order. Availability vectors
// are empty (all zero) or one entry per sender / receiver.
DecentralizedRun RunDecentralized(int num_receivers,
                                  const std::vector<std::vector<OutgoingBlock>>& sequences,
                                  const std::vector<Time>& sender_available,
                                  const std::vector<Time>& receiver_available);

}  // namespace clf::scheduler
