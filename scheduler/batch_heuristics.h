// The centralized batch heuristics of paper 001 (Chen & Wu, "Efficient
// Parallel I/O Scheduling for Clusters", §3), which choose for every transfer
// the replica (I/O node) that serves it and when.
//
// Uniform-length transfers (§3.1): LDDF, LCDF, LDSDF. Variable-length
// transfers (§3.2): SJF, EATF, Random. Every function accepts any valid
// Problem (checked by the caller with Problem::Validate) and returns a valid
// Schedule. Pure functions: thread safe, deterministic (Random for a seed).
//
// Choices where the paper leaves room (see docs/scheduler.md):
//  - Degrees count pending edges; an edge is one (transfer, replica) pair, so
//    a transfer with two replicas contributes two edges. Scheduling a transfer
//    removes all of its edges ("the assignment of a request to a node can
//    result in removal of multiple edges", §3.1), not just the chosen one.
//  - "Any one of the requests" and every tie is broken deterministically:
//    lower node index, lower transfer index, earlier position in the
//    transfer's replica list.
//  - The round-based heuristics (LDDF, LCDF, LDSDF, SJF, Random) produce an
//    order of decisions; start times come from TimeInOrder (as soon as both
//    nodes are free, in that order). EATF computes its own times, as written.
#pragma once

#include <cstdint>

#include "scheduler/problem.h"

namespace clf::scheduler {

// LDDF (Chen & Majumdar): in each round, I/O nodes in increasing order of
// degree (taken at the start of the round) each take the lowest-index pending
// transfer from a compute node not yet served in this round.
Schedule PlanLddf(const Problem& problem);

// LCDF: in each round, edges sorted by combined degree (compute + I/O degree,
// taken at the start of the round; stable, so ties keep transfer order) are
// walked in order; an edge is taken if neither its compute node nor its I/O
// node has been used in this round.
Schedule PlanLcdf(const Problem& problem);

// LDSDF: in each round, I/O nodes in increasing order of degree (start of the
// round); each takes, among the compute nodes not yet used in this round that
// have a transfer it can serve, the one with the lowest current degree.
// Choice: the pseudocode does not mark compute nodes as used within a round;
// we do, as LDDF and LCDF do, so that a round is one time slot of the uniform
// model.
Schedule PlanLdsdf(const Problem& problem);

// SJF: in each round every I/O node that can serve something is chosen once;
// repeatedly the lightest edge (size, then transfer index, then replica
// position) whose I/O node is not yet chosen in this round is taken. As in
// the pseudocode, compute nodes are not restricted within a round.
Schedule PlanSjf(const Problem& problem);

// EATF: repeatedly take the earliest-available I/O node that can still serve
// something, then among its pending transfers the one whose compute node is
// available earliest, and start it at max of the two availability times.
// Choice: ties between compute nodes available at the same time go to the
// shorter transfer, then the lower transfer index (this reproduces §4's
// worked examples, which the bare rule leaves open).
Schedule PlanEatf(const Problem& problem);

// Random: like SJF, but in each round the edge is drawn uniformly among the
// pending edges whose I/O node is not yet chosen in this round.
Schedule PlanRandom(const Problem& problem, uint64_t seed);

}  // namespace clf::scheduler
