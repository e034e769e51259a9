#include "tools/fsck_copies.h"

#include <algorithm>
#include <utility>

#include "common/layout.h"

namespace clf::tools {
namespace {

constexpr uint64_t kChunk = uint64_t{1} << 20;

// The first index where a and b differ (they do).
uint64_t FirstDifference(const std::string& a, const std::string& b) {
  auto m = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<uint64_t>(m.first - a.begin());
}

enum class Outcome { kSame, kDiffers, kChanged };

// Compares copy `slot` of `primary`'s units with copy `ref` over `local` bytes.
Result<Outcome> CompareOne(client::FsckClient& fc, const client::FsckInode& f, ServerId primary,
                           uint32_t ref, uint32_t slot, uint64_t local, CopyDiff* diff) {
  std::string a, b;
  auto read = [&](uint32_t s, uint64_t off, uint64_t len, std::string* out) -> Result<bool> {
    Status st = fc.ReadCopy(f.handle, f.layout.replicas, primary, s, off, len, out);
    if (st.ok()) return true;
    if (st.code() == Code::kNotCurrent) return false;  // M marked it stale meanwhile
    if (st.code() == Code::kUnavailable) return st;
    if (s == ref) return st.WithContext("acting primary copy");
    diff->error = st.ToString();
    return false;
  };
  for (uint64_t off = 0; off < local; off += kChunk) {
    const uint64_t len = std::min(kChunk, local - off);
    CLF_ASSIGN_OR_RETURN(bool ra, read(ref, off, len, &a));
    if (!ra) return Outcome::kChanged;
    CLF_ASSIGN_OR_RETURN(bool rb, read(slot, off, len, &b));
    if (!rb) return diff->error.empty() ? Outcome::kChanged : Outcome::kDiffers;
    if (a == b) continue;
    // Once more: only a difference that holds is reported.
    CLF_ASSIGN_OR_RETURN(ra, read(ref, off, len, &a));
    CLF_ASSIGN_OR_RETURN(rb, read(slot, off, len, &b));
    if (!ra || (!rb && diff->error.empty())) return Outcome::kChanged;
    if (!rb) return Outcome::kDiffers;
    if (a == b) continue;
    diff->offset = off + FirstDifference(a, b);
    return Outcome::kDiffers;
  }
  return Outcome::kSame;
}

}  // namespace

bool IsStale(const client::FsckInode& i, ServerId primary, uint32_t slot) {
  return std::find(i.stale.begin(), i.stale.end(), std::make_pair(primary, slot)) != i.stale.end();
}

Result<std::vector<CopyDiff>> CompareCopies(client::FsckClient& fc,
                                            const std::vector<client::FsckInode>& files,
                                            CopyCounts* counts) {
  const uint32_t n = fc.servers();
  std::vector<CopyDiff> out;
  for (const client::FsckInode& f : files) {
    if (f.type != client::FileType::kRegular || f.layout.replicas <= 1) continue;
    if (f.writers > 0) {
      ++counts->skipped_open;
      continue;
    }
    ++counts->files;
    if (f.size == 0) continue;
    for (ServerId p : DataServers(f.layout, n)) {
      const uint64_t local = LocalSizeFor(f.layout, n, p, f.size);
      if (local == 0) continue;
      std::vector<uint32_t> current;
      for (uint32_t s = 0; s < f.layout.replicas; ++s) {
        if (!IsStale(f, p, s)) current.push_back(s);
      }
      for (size_t k = 1; k < current.size(); ++k) {
        CopyDiff d;
        d.handle = f.handle;
        d.primary = p;
        d.slot = current[k];
        d.against = current[0];
        d.size = f.size;
        CLF_ASSIGN_OR_RETURN(Outcome o, CompareOne(fc, f, p, current[0], current[k], local, &d));
        if (o == Outcome::kChanged) {
          ++counts->skipped_changed;
          continue;
        }
        ++counts->copies;
        counts->bytes += local;
        if (o == Outcome::kDiffers) out.push_back(std::move(d));
      }
    }
  }
  return out;
}

}  // namespace clf::tools
