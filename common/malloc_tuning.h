// Keeps the data path's buffers in memory the process already has.
//
// glibc serves allocations above its mmap threshold (128 KiB to start with)
// with a fresh mmap and gives the pages back at free; a heap's free top is
// given back once it passes the trim threshold. The data path allocates and
// frees 1 MiB buffers at the rate of its requests, so with the defaults every
// such buffer is new memory: a page fault per 4 KiB, the kernel zeroing the
// page, and on a virtual machine whose free pages are handed back to the host
// (virtio-balloon free page reporting, as on the development machines) a host
// fault as well. Measured on clfmount and clfd together (fio, 1 MiB requests,
// same cluster, alternating): w2's 1 MiB writes 972-1,100 -> 1,348-1,412 MB/s
// on a fresh cluster; buffered 1 MiB reads of a 1 GiB file 1,520-1,698 ->
// 1,607-1,941. The cost: up to kTrimBytes of freed memory per malloc arena
// stays with the process instead of going back to the system.
#pragma once

#include <malloc.h>

namespace clf {

// glibc's ceiling for the threshold on 64-bit (larger values are refused);
// a request's buffer is at most 64 MiB, and those above this are rare.
inline constexpr int kMmapThresholdBytes = 32 << 20;
inline constexpr int kTrimBytes = 256 << 20;

// Call once at start, before threads.
inline void TuneMalloc() {
  mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);
  mallopt(M_TRIM_THRESHOLD, kTrimBytes);
}

}  // namespace clf
