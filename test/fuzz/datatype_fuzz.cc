// libFuzzer harness: arbitrary bytes as a datatype's wire encoding
// (common/datatype.h), as a server decodes one sent with a request or a view
// (paper 002). Pure code: no server, no RocksDB.
//
// A decoded type must re-encode to the same bytes and decode again, and a
// cursor over a few instances of it (a window cut by the input's last bytes)
// must yield at most 4096 extents that stay inside the window's data, in
// bounds, never empty and never adjacent; a server's share of them (4 KiB
// stripes on 3 servers) never holds more bytes than the cursor yielded.
// A view over it yields no more than its window. Any breach aborts.
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/datatype.h"

namespace {

uint64_t Tail(const uint8_t* data, size_t size, size_t k) {
  return size > k ? data[size - 1 - k] : 0;
}

void Check(bool ok) {
  if (!ok) std::abort();
}

// Extents of `count` instances from stream position `skip`, at most `limit`
// bytes; returns the bytes seen.
uint64_t Walk(const clf::TypePtr& t, uint64_t count, uint64_t skip, uint64_t limit) {
  clf::Result<clf::TypeCursor> c = clf::TypeCursor::Make(t, 4096, count, skip, limit);
  if (!c.ok()) return 0;
  const uint64_t lo = 4096 + static_cast<uint64_t>(t->true_lb());
  const uint64_t hi =
      4096 + (count - 1) * static_cast<uint64_t>(t->extent()) + static_cast<uint64_t>(t->true_ub());
  clf::Extent e, prev{0, 0};
  uint64_t bytes = 0, pos = 0;
  for (int i = 0; i < 4096 && c->Next(&e, &pos); ++i) {
    Check(e.length > 0 && e.offset >= lo && e.end() <= hi);
    Check(pos == skip + bytes);
    Check(!(prev.length > 0 && prev.end() == e.offset));
    bytes += e.length;
    prev = e;
  }
  Check(bytes <= limit);
  return bytes;
}

void Share(const clf::TypePtr& t, uint64_t count, uint64_t limit) {
  clf::Result<clf::TypeCursor> c = clf::TypeCursor::Make(t, 4096, count, 0, limit);
  if (!c.ok()) return;
  clf::ServerPieces sp(*c, clf::Layout{4096, 3, 1, 1}, 3, 2);
  clf::Piece p;
  uint64_t bytes = 0;
  for (int i = 0; i < 4096 && sp.Next(&p); ++i) {
    Check(p.length > 0 && p.server == 2);
    bytes += p.length;
  }
  Check(bytes <= limit);
}

// A file view over the type: the same window, tiled without end.
void View(const clf::TypePtr& t, uint64_t skip, uint64_t limit) {
  clf::Result<clf::TypeCursor> c = clf::TypeCursor::View(t, 4096, skip, limit);
  if (!c.ok()) return;
  clf::Extent e;
  uint64_t bytes = 0;
  for (int i = 0; i < 4096 && c->Next(&e); ++i) bytes += e.length;
  Check(bytes <= limit);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clf;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  Result<TypePtr> t = Decode(in);
  if (!t.ok()) return 0;
  const std::string wire = Encode(**t);
  Check(wire == in);  // the encoding is canonical: one byte string per type
  Result<TypePtr> again = Decode(wire);
  Check(again.ok() && Encode(**again) == wire);
  Check((*t)->pieces() <= (*t)->size() && (*t)->true_extent() >= 0 && (*t)->extent() >= 0);
  const uint64_t count = 1 + Tail(data, size, 0) % 4;
  const uint64_t skip = Tail(data, size, 1) * 37;
  const uint64_t limit = 1 + Tail(data, size, 2) * 1021;
  Walk(*t, count, skip, limit);
  Share(*t, count, limit);
  View(*t, skip, limit);
  return 0;
}
