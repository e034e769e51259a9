// The three access patterns of paper 003 (Aarestad et al., CCGrid'06), as the
// exact extents each client accesses: the ROMIO 3-D block test, the FLASH I/O
// checkpoint and the tile reader. Pure functions; thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "locking/extent_list.h"
#include "locking/strided_pattern.h"

namespace clf::tools::bench {

struct ClientAccess {
  locking::ExtentList extents;      // what the client reads or writes, coalesced
  locking::StridedPattern pattern;  // the same access as a compact description
  uint64_t bytes = 0;
};

struct Workload {
  std::string name;  // 3d-block | flash | tile
  int clients = 0;
  int files = 1;  // operations per client, one file each (tile: frames)
  uint64_t file_bytes = 0;
  std::vector<ClientAccess> access;  // per client
};

// 100 x 100 x 100 array of 4-byte ints, block-distributed over clients = k^3
// (8, 27, 64): client (i, j, l) owns [z_i) x [y_j) x [x_l), with 100 split into
// k nearly equal parts.
Workload ThreeDBlock(int clients);
// The same array over any client count, split as MPI_Dims_create does (the
// ROMIO test's decomposition): balanced factors, largest on z. 2 -> 2x1x1
// (z slabs), 4 -> 2x2x1, 8 -> 2x2x2; cubes give ThreeDBlock's grid.
Workload ThreeDBlockDims(int clients);
// FLASH-like checkpoint: every client has 80 blocks of 8x8x8 cells of 8-byte
// values for each of 24 variables; the file holds variable 0 of every block of
// every client, then variable 1, ... (block b of client p of variable v at
// ((v * 80 + b) * clients + p) * 4096).
Workload Flash(int clients);
// Tile reader: 6 clients in a 3 x 2 grid of 1024 x 768 tiles of 24-bit pixels
// over a frame overlapped by 270 pixels horizontally and 128 vertically
// (2532 x 1408 pixels, 10.7 MB); `frames` files read in sequence.
Workload TileReader(int frames);

}  // namespace clf::tools::bench
