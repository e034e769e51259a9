// Validity checking and lower bounds for schedules of a Problem.
// Pure functions; thread safe.
#pragma once

#include "common/status.h"
#include "scheduler/problem.h"

namespace clf::scheduler {

// OK iff `schedule` is a valid schedule of `problem`: one placement per
// transfer, on one of its allowed I/O nodes, starting no earlier than both of
// its nodes' availability times, no node in two transfers at once (intervals
// are half-open: one may start when the previous ends), and `length` equal to
// the latest finish time. The message names the first violation found.
Status CheckSchedule(const Problem& problem, const Schedule& schedule);

// A lower bound on the length of every valid schedule, the maximum of:
//  - per transfer: max(its compute node's availability, the earliest
//    availability among its allowed I/O nodes) + size;
//  - per compute node: availability + total size of its transfers;
//  - per I/O node: availability + total size of the transfers only it can serve;
//  - the water level when all the work is poured onto the I/O nodes that can
//    serve anything, each from its availability time.
// 0 for an empty problem. `problem` must be valid.
Time LowerBound(const Problem& problem);

}  // namespace clf::scheduler
