#include "client/list_io.h"

#include <algorithm>
#include <map>

#include "common/config.h"

namespace clf::client {
namespace {

Status CheckFileExtents(const std::vector<FileExtent>& extents, uint64_t* total_bytes) {
  if (extents.size() > kMaxExtents) {
    return Status(Code::kTooBig, "list I/O: more than " + std::to_string(kMaxExtents) + " extents");
  }
  uint64_t total = 0;
  for (size_t i = 0; i < extents.size(); ++i) {
    const FileExtent& e = extents[i];
    if (e.offset > kMaxFileSize || e.length > kMaxFileSize - e.offset) {
      return Status(Code::kFileTooBig,
                    "list I/O: extent " + std::to_string(i) + " ends past the maximum file size");
    }
    total += e.length;  // no overflow: each length <= 2^60 and at most 2^20 of them
    if (total > kMaxListIoBytes) {
      return Status(Code::kTooBig, "list I/O: extents total more than " +
                                       std::to_string(kMaxListIoBytes >> 20) + " MiB");
    }
  }
  *total_bytes = total;
  return Status::Ok();
}

}  // namespace

Result<std::vector<ListRequest>> PlanListIo(const Layout& layout, uint32_t servers,
                                            const std::vector<FileExtent>& extents,
                                            uint64_t* total_bytes) {
  CLF_RETURN_IF_ERROR(ValidateLayout(layout, servers));
  CLF_RETURN_IF_ERROR(CheckFileExtents(extents, total_bytes));
  // Per server, its requests in order; the last one is being filled.
  std::map<ServerId, std::vector<ListRequest>> by_server;
  uint64_t pos = 0;  // position in the caller's buffer
  for (const FileExtent& e : extents) {
    if (e.length == 0) continue;
    for (const Piece& p : MapRange(layout, servers, e.offset, e.length)) {
      std::vector<ListRequest>& reqs = by_server[p.server];
      uint64_t local = p.local_offset, left = p.length, at = pos + (p.logical_offset - e.offset);
      while (left > 0) {
        if (reqs.empty() || reqs.back().bytes == kMaxIoBytes ||
            reqs.back().extents.size() == kMaxListExtentsPerRequest) {
          reqs.emplace_back().server = p.server;
        }
        ListRequest& r = reqs.back();
        const uint64_t n = std::min(left, kMaxIoBytes - r.bytes);
        if (!r.extents.empty() && r.extents.back().offset + r.extents.back().length == local &&
            r.buffer_offsets.back() + r.extents.back().length == at) {
          r.extents.back().length += n;  // adjacent in the object and in the buffer
        } else {
          r.extents.push_back(Extent{local, n});
          r.buffer_offsets.push_back(at);
        }
        r.bytes += n;
        local += n;
        at += n;
        left -= n;
      }
    }
    pos += e.length;
  }
  std::vector<ListRequest> out;
  for (auto& [s, reqs] : by_server) {
    for (ListRequest& r : reqs) out.push_back(std::move(r));
  }
  return out;
}

std::vector<iovec> ListIovecs(const ListRequest& r, char* buf) {
  std::vector<iovec> out;
  out.reserve(r.extents.size());
  for (size_t i = 0; i < r.extents.size(); ++i) {
    out.push_back(iovec{buf + r.buffer_offsets[i], r.extents[i].length});
  }
  return out;
}

}  // namespace clf::client
