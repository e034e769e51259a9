// Noncontiguous list I/O (Client::WriteList / ReadList): how a list of file
// extents becomes one request per data server. Internal to libclf.
#pragma once

#include <cstdint>
#include <vector>

#include "clf/client.h"
#include "common/layout.h"
#include "common/status.h"
#include "common/transport/transport.h"

namespace clf::client {

// At most this many extents and kMaxIoBytes payload go in one data request;
// a server's share beyond that is sent as several requests, one after the
// other. 2^18 extents keep an inline gRPC request (16 bytes of protobuf per
// extent at most, plus 64 MiB) under the 80 MiB message limit.
inline constexpr size_t kMaxListExtentsPerRequest = size_t{1} << 18;

// One data request of a list access: extents of one server's object (local
// offsets) and, for each, where its bytes are in the caller's packed buffer.
struct ListRequest {
  ServerId server = 0;
  std::vector<Extent> extents;
  std::vector<uint64_t> buffer_offsets;  // same size as extents
  uint64_t bytes = 0;
};

// Validates a list (count <= kMaxExtents, each extent within kMaxFileSize,
// total <= kMaxListIoBytes) and maps it onto the layout: the requests, at
// most one per server unless a server's share exceeds one request's limits,
// in server order. Each server's pieces keep list order (a write of
// overlapping extents: the later extent's bytes win); pieces adjacent both in
// the object and in the buffer are merged. Zero-length extents are skipped.
Result<std::vector<ListRequest>> PlanListIo(const Layout& layout, uint32_t servers,
                                            const std::vector<FileExtent>& extents,
                                            uint64_t* total_bytes);

// The buffer pieces of one request as iovecs over `buf`.
std::vector<iovec> ListIovecs(const ListRequest& r, char* buf);

}  // namespace clf::client
