#include "fuse/read_windows.h"

#include <algorithm>

namespace clf::fuse {

ReadWindows::File& ReadWindows::Touch(uint64_t ino) {
  auto it = files_.find(ino);
  if (it != files_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second;
  }
  if (files_.size() >= kFiles) {
    files_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(ino);
  File& f = files_[ino];
  f.generation = next_generation_++;
  f.lru = lru_.begin();
  return f;
}

bool ReadWindows::Serve(uint64_t ino, uint64_t off, uint64_t size, std::string* out) {
  if (size == 0 || size > kSmallRead) return false;
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(ino);
  if (it == files_.end()) return false;
  File& f = it->second;
  for (const Window& w : f.windows) {
    if (off < w.off || off + size > w.off + w.data.size()) continue;
    out->assign(w.data, off - w.off, size);
    // The stream moves on: its next miss continues from here.
    for (Stream& s : f.streams) {
      if (s.end == off) {
        s.end = off + size;
        break;
      }
    }
    lru_.splice(lru_.begin(), lru_, f.lru);
    ++served_;
    return true;
  }
  return false;
}

ReadWindows::Plan ReadWindows::Fetch(uint64_t ino, uint64_t off, uint64_t size, uint64_t eof) {
  Plan p;
  p.length = size;
  if (size == 0 || size > kSmallRead) return p;
  std::lock_guard<std::mutex> l(mu_);
  File& f = Touch(ino);
  p.generation = f.generation;
  Stream* s = nullptr;
  for (Stream& c : f.streams) {
    if (c.end == off) {
      s = &c;
      break;
    }
  }
  if (s == nullptr) {
    // A new stream: this read is fetched as asked; a next read at its end continues it.
    if (f.streams.size() >= kStreams) f.streams.erase(f.streams.begin());
    f.streams.push_back(Stream{off + size, kFirstWindow});
    return p;
  }
  const uint64_t want = std::max(size, s->next);
  const uint64_t left = eof > off ? eof - off : 0;
  p.length = std::max(size, std::min(want, left));
  p.window = p.length > size;
  s->end = off + size;
  s->next = std::min(kMaxWindow, s->next * 2);
  ++fetched_;
  return p;
}

void ReadWindows::Fill(uint64_t ino, const Plan& p, uint64_t off, std::string data) {
  if (!p.window || data.empty()) return;
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(ino);
  if (it == files_.end() || it->second.generation != p.generation) return;  // dropped meanwhile
  File& f = it->second;
  // A window overlapping the new one holds older bytes of the same range.
  const uint64_t end = off + data.size();
  f.windows.erase(
      std::remove_if(f.windows.begin(), f.windows.end(),
                     [&](const Window& w) { return w.off < end && off < w.off + w.data.size(); }),
      f.windows.end());
  if (f.windows.size() >= kWindows) f.windows.erase(f.windows.begin());
  f.windows.push_back(Window{off, std::move(data)});
}

void ReadWindows::Drop(uint64_t ino) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(ino);
  if (it == files_.end()) return;
  lru_.erase(it->second.lru);
  files_.erase(it);
}

namespace {

// The pieces of [off, off+size) in `refs` (ranges in order, data landed).
template <typename Refs>
ReadWindows::Pieces PiecesOf(const Refs& refs, uint64_t off, uint64_t size) {
  ReadWindows::Pieces out;
  const uint64_t end = off + size;
  for (const auto& r : refs) {
    const uint64_t from = std::max(off, r.off), to = std::min(end, r.off + r.length);
    if (from >= to || r.data == nullptr) continue;
    const uint64_t at = from - r.off;
    if (at >= r.data->size()) continue;
    out.push_back(ReadWindows::Piece{r.data, static_cast<size_t>(at),
                                     static_cast<size_t>(std::min<uint64_t>(to - from, r.data->size() - at))});
  }
  return out;
}

}  // namespace

std::vector<ReadWindows::Chunk>::iterator ReadWindows::FirstEndingAfter(std::vector<Chunk>& chunks,
                                                                       uint64_t pos) {
  return std::lower_bound(chunks.begin(), chunks.end(), pos,
                          [](const Chunk& c, uint64_t p) { return c.off + c.length <= p; });
}

void ReadWindows::MoveStream(File& f, uint64_t off, uint64_t end) {
  for (uint64_t& e : f.ahead_ends) {
    if (e == off) {
      e = end;
      return;
    }
  }
}

ReadWindows::Ahead ReadWindows::TakeAhead(uint64_t ino, uint64_t off, uint64_t size, Pieces* out,
                                          Landed then) {
  if (size == 0) return Ahead::kMiss;
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(ino);
  if (it == files_.end()) return Ahead::kMiss;
  File& f = it->second;
  // The chunks that cover [off, off+size), contiguously.
  const uint64_t end = off + size;
  const size_t first = static_cast<size_t>(FirstEndingAfter(f.chunks, off) - f.chunks.begin());
  size_t last = first;
  uint64_t pos = off;
  bool landed = true;
  while (pos < end && last < f.chunks.size() && f.chunks[last].off <= pos) {
    pos = f.chunks[last].off + f.chunks[last].length;
    landed = landed && f.chunks[last].data != nullptr;
    ++last;
  }
  if (pos < end) {
    // A small read that continues a stream moves it on, as a large one's
    // PlanAhead does: the kernel cuts a 1 MiB read into an unaligned buffer
    // into 1 MiB - 16 bytes and 16 bytes, and the stream's next large read
    // starts where the 16 bytes ended.
    if (size <= kSmallRead) MoveStream(f, off, end);
    return Ahead::kMiss;
  }
  auto waiter = std::make_shared<Waiter>();
  waiter->off = off;
  waiter->size = size;
  for (size_t i = first; i < last; ++i) {
    Chunk& c = f.chunks[i];
    c.taken += std::min(end, c.off + c.length) - std::max(off, c.off);
    waiter->refs.push_back(Waiter::Ref{c.id, c.off, c.length, c.data});
    if (c.data == nullptr) {
      ++waiter->remaining;
      waiting_[c.id].push_back(waiter);
    }
  }
  // Chunks reads took whole leave the table (one in flight still answers its waiters).
  f.chunks.erase(std::remove_if(f.chunks.begin() + static_cast<std::ptrdiff_t>(first),
                                f.chunks.begin() + static_cast<std::ptrdiff_t>(last),
                                [](const Chunk& c) { return c.taken >= c.length; }),
                 f.chunks.begin() + static_cast<std::ptrdiff_t>(last));
  // The stream moves on (a large read's PlanAhead finds it at either end).
  MoveStream(f, off, end);
  lru_.splice(lru_.begin(), lru_, f.lru);
  ++ahead_served_;
  if (landed) {
    *out = PiecesOf(waiter->refs, off, size);
    return Ahead::kReady;
  }
  waiter->then = std::move(then);
  return Ahead::kWaiting;
}

std::vector<ReadWindows::AheadPlan> ReadWindows::PlanAhead(uint64_t ino, uint64_t off,
                                                           uint64_t size, uint64_t eof) {
  std::vector<AheadPlan> plans;
  if (size == 0) return plans;
  std::lock_guard<std::mutex> l(mu_);
  File& f = Touch(ino);
  const uint64_t end = off + size;
  auto stream = std::find_if(f.ahead_ends.begin(), f.ahead_ends.end(),
                             [&](uint64_t e) { return e == off || e == end; });
  const bool sequential = off == 0 || stream != f.ahead_ends.end();
  if (stream != f.ahead_ends.end()) {
    *stream = end;
  } else {
    if (f.ahead_ends.size() >= kStreams) f.ahead_ends.erase(f.ahead_ends.begin());
    f.ahead_ends.push_back(end);
  }
  if (!sequential) return plans;
  const uint64_t to = std::min(eof, end + kAheadBytes);
  uint64_t pos = end;
  while (pos < to) {
    // The first chunk at or after pos.
    auto next = FirstEndingAfter(f.chunks, pos);
    if (next != f.chunks.end() && next->off <= pos) {
      pos = next->off + next->length;  // already there
      continue;
    }
    uint64_t stop = std::min(eof, (pos / kChunk + 1) * kChunk);
    if (next != f.chunks.end()) stop = std::min(stop, next->off);
    if (f.chunks.size() >= kAheadChunks) {
      // Room: the oldest landed chunk goes (those in flight stay).
      auto oldest = f.chunks.end();
      for (auto c = f.chunks.begin(); c != f.chunks.end(); ++c) {
        if (c->data != nullptr && (oldest == f.chunks.end() || c->id < oldest->id)) oldest = c;
      }
      if (oldest == f.chunks.end()) break;
      f.chunks.erase(oldest);
      continue;  // the iterators moved
    }
    Chunk c;
    c.off = pos;
    c.length = stop - pos;
    c.id = next_chunk_++;
    plans.push_back(AheadPlan{c.off, c.length, f.generation, c.id});
    f.chunks.insert(next, std::move(c));
    ++fetched_;
    pos = stop;
  }
  return plans;
}

std::string ReadWindows::TakeBuffer() {
  std::lock_guard<std::mutex> l(spares_->mu);
  if (spares_->buffers.empty()) return std::string();
  std::string b = std::move(spares_->buffers.back());
  spares_->buffers.pop_back();
  return b;
}

ChunkBytes::Recycle ReadWindows::Recycler() const {
  // When the chunk's last reader is done, its buffer waits for the next fetch.
  return [spares = spares_](std::string owned) {
    if (owned.capacity() < kChunk) return;
    // Sized to a whole chunk once: later fetches of up to kChunk bytes only
    // shrink it (no fill).
    if (owned.size() < kChunk) owned.resize(kChunk);
    std::lock_guard<std::mutex> l(spares->mu);
    if (spares->buffers.size() < kSpareBuffers) spares->buffers.push_back(std::move(owned));
  };
}

void ReadWindows::LandAhead(uint64_t ino, const AheadPlan& p, bool ok, std::string data) {
  Land(ino, p, ok, std::make_shared<const ChunkBytes>(std::move(data), Recycler()));
}

void ReadWindows::LandAheadPiped(uint64_t ino, const AheadPlan& p, std::unique_ptr<ChunkPipe> pipe,
                                 std::string spare) {
  Land(ino, p, true,
       std::make_shared<const ChunkBytes>(std::move(pipe), p.length, std::move(spare), Recycler()));
}

void ReadWindows::Land(uint64_t ino, const AheadPlan& p, bool ok,
                       std::shared_ptr<const ChunkBytes> bytes) {
  std::vector<std::shared_ptr<Waiter>> ready;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = files_.find(ino);
    if (it != files_.end() && it->second.generation == p.generation) {
      std::vector<Chunk>& chunks = it->second.chunks;
      for (size_t i = 0; i < chunks.size(); ++i) {
        if (chunks[i].id != p.id) continue;
        if (ok) {
          chunks[i].data = bytes;
        } else {
          chunks.erase(chunks.begin() + static_cast<std::ptrdiff_t>(i));  // reads fetch it themselves
        }
        break;
      }
    }
    auto waiting = waiting_.find(p.id);
    if (waiting != waiting_.end()) {
      for (std::shared_ptr<Waiter>& w : waiting->second) {
        for (Waiter::Ref& r : w->refs) {
          if (r.id == p.id) r.data = bytes;
        }
        w->failed = w->failed || !ok;
        if (--w->remaining == 0) ready.push_back(std::move(w));
      }
      waiting_.erase(waiting);
    }
  }
  for (const std::shared_ptr<Waiter>& w : ready) {
    if (w->failed) {
      w->then(false, {});
    } else {
      w->then(true, PiecesOf(w->refs, w->off, w->size));
    }
  }
}

void ReadWindows::NoteRead(uint64_t ino, uint64_t size) {
  if (size == 0) return;
  std::lock_guard<std::mutex> l(mu_);
  auto it = sizes_.find(ino);
  if (it == sizes_.end()) {
    if (sizes_.size() >= kSizeFiles) {
      sizes_.erase(sizes_lru_.back());
      sizes_lru_.pop_back();
    }
    sizes_lru_.push_front(ino);
    it = sizes_.emplace(ino, Sizes{0, 0, sizes_lru_.begin()}).first;
  } else {
    sizes_lru_.splice(sizes_lru_.begin(), sizes_lru_, it->second.lru);
  }
  Sizes& z = it->second;
  (size > kSmallRead ? z.large : z.small) += 1;
  if (z.small + z.large > kSizeCount) {
    z.small /= 2;
    z.large /= 2;
  }
}

bool ReadWindows::ReadsSmall(uint64_t ino) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = sizes_.find(ino);
  return it != sizes_.end() && it->second.small > 2 * it->second.large;
}

uint64_t ReadWindows::ahead_served() const {
  std::lock_guard<std::mutex> l(mu_);
  return ahead_served_;
}

uint64_t ReadWindows::served() const {
  std::lock_guard<std::mutex> l(mu_);
  return served_;
}

uint64_t ReadWindows::fetched() const {
  std::lock_guard<std::mutex> l(mu_);
  return fetched_;
}

}  // namespace clf::fuse
