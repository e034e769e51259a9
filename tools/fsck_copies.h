// clf fsck --copies: compares the copies of replicated files (docs/ARCHITECTURE.md
// "fsck"). Every current copy of a primary's units is read through the Data
// service beside the acting primary's copy (the lowest current slot: the copy
// that orders writes, so the one taken as right) and compared chunk by chunk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clf/fsck_client.h"
#include "common/status.h"

namespace clf::tools {

// A current copy whose bytes are not those of its acting primary (or that
// could not be read).
struct CopyDiff {
  Handle handle = 0;
  ServerId primary = 0;  // whose units
  uint32_t slot = 0;     // the differing copy
  uint32_t against = 0;  // the acting primary's slot it was compared with
  uint64_t offset = 0;   // the first differing byte of the packed object
  uint64_t size = 0;     // the file size the comparison used
  std::string error;     // non-empty: the copy failed to read (not "stale")
};

struct CopyCounts {
  uint64_t files = 0;         // replicated files compared
  uint64_t copies = 0;        // copies compared with their acting primary
  uint64_t bytes = 0;         // bytes of those copies compared
  uint64_t skipped_open = 0;  // replicated files with open writers: not compared
  uint64_t skipped_changed = 0;  // copies M marked stale during the comparison
};

// M records copy `slot` of `primary`'s units of the file stale.
bool IsStale(const client::FsckInode& i, ServerId primary, uint32_t slot);

// Compares every current copy of each replicated regular file in `files`
// that has no open writer (a write in flight may have reached one copy
// only). A difference is read again before it is reported. An error only if
// a server did not answer (kUnavailable): nothing can be decided then.
Result<std::vector<CopyDiff>> CompareCopies(client::FsckClient& fc,
                                            const std::vector<client::FsckInode>& files,
                                            CopyCounts* counts);

}  // namespace clf::tools
