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

ReadWindows::Ahead ReadWindows::TakeAhead(uint64_t ino, uint64_t off, uint64_t size,
                                          std::string* out, Landed then) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(ino);
  if (it == files_.end()) return Ahead::kMiss;
  File& f = it->second;
  for (size_t i = 0; i < f.blocks.size(); ++i) {
    Block& b = f.blocks[i];
    if (b.off != off || b.length < size) continue;
    Ahead a = Ahead::kWaiting;
    if (b.landed) {
      *out = std::move(b.data);
      out->resize(std::min<uint64_t>(size, out->size()));
      a = Ahead::kReady;
    } else {
      waiting_[b.id] = Waiter{size, std::move(then)};
    }
    f.blocks.erase(f.blocks.begin() + static_cast<std::ptrdiff_t>(i));
    lru_.splice(lru_.begin(), lru_, f.lru);
    ++ahead_served_;
    return a;
  }
  return Ahead::kMiss;
}

std::vector<ReadWindows::AheadPlan> ReadWindows::PlanAhead(uint64_t ino, uint64_t off,
                                                           uint64_t size, uint64_t eof) {
  std::vector<AheadPlan> plans;
  if (size == 0) return plans;
  std::lock_guard<std::mutex> l(mu_);
  File& f = Touch(ino);
  auto stream = std::find(f.large_ends.begin(), f.large_ends.end(), off);
  const bool sequential = off == 0 || stream != f.large_ends.end();
  if (stream != f.large_ends.end()) {
    *stream = off + size;
  } else {
    if (f.large_ends.size() >= kStreams) f.large_ends.erase(f.large_ends.begin());
    f.large_ends.push_back(off + size);
  }
  if (!sequential) return plans;
  for (size_t k = 1; k <= kAheadDepth; ++k) {
    const uint64_t next = off + k * size;
    if (next >= eof) break;
    bool there = false;
    for (const Block& b : f.blocks) there = there || b.off == next;
    if (there) continue;
    if (f.blocks.size() >= kAheadBlocks) {
      // Room: the oldest block that landed goes (one in flight stays).
      auto landed =
          std::find_if(f.blocks.begin(), f.blocks.end(), [](const Block& b) { return b.landed; });
      if (landed == f.blocks.end()) break;
      f.blocks.erase(landed);
    }
    Block b;
    b.off = next;
    b.length = std::min(size, eof - next);
    b.id = next_block_++;
    plans.push_back(AheadPlan{b.off, b.length, f.generation, b.id});
    f.blocks.push_back(std::move(b));
    ++fetched_;
  }
  return plans;
}

void ReadWindows::LandAhead(uint64_t ino, const AheadPlan& p, bool ok, std::string data) {
  Waiter w;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto waiting = waiting_.find(p.id);
    if (waiting != waiting_.end()) {
      w = std::move(waiting->second);
      waiting_.erase(waiting);
    } else {
      auto it = files_.find(ino);
      if (it == files_.end() || it->second.generation != p.generation) return;  // dropped
      std::vector<Block>& blocks = it->second.blocks;
      for (size_t i = 0; i < blocks.size(); ++i) {
        if (blocks[i].id != p.id) continue;
        if (!ok) {
          blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));  // the read fetches it
        } else {
          blocks[i].landed = true;
          blocks[i].data = std::move(data);
        }
        return;
      }
      return;  // made room for another
    }
  }
  if (ok) data.resize(std::min<uint64_t>(w.size, data.size()));
  w.then(ok, std::move(data));
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
