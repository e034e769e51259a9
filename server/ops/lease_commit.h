// Meta.Commit: the creates, unlinks, setattrs and write reports a directory
// lease holder acknowledged locally and now commits in order. No gRPC types:
// MetaService calls it on an executor, the meta fuzz harness directly.
// Thread safety: as MetaOps and DirLeases (thread safe; blocks on RocksDB).
#pragma once

#include <cstdint>

#include "clf/v1/meta.pb.h"
#include "common/status.h"
#include "server/ops/dir_leases.h"
#include "server/ops/meta_ops.h"

namespace clf::server {

// Runs r's ops (validated: validate.h) for `session`, one result per op in
// *out (code 0 and "" when ok): each op as its own request would run, so a
// failure leaves the earlier ones done. A create or unlink needs the session
// to hold the lease on its directory (kStale otherwise). A run of unlinks of
// distinct files in one directory is one group commit (MetaOps::RemoveFiles).
// kInvalid for the whole call without leases (null), without a session (0) or
// with root_squash on.
Status RunCommit(MetaOps* ops, DirLeases* leases, uint64_t session, const v1::CommitRequest& r,
                 v1::CommitReply* out);

}  // namespace clf::server
