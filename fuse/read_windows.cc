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
  f.windows.erase(std::remove_if(f.windows.begin(), f.windows.end(),
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

uint64_t ReadWindows::served() const {
  std::lock_guard<std::mutex> l(mu_);
  return served_;
}

uint64_t ReadWindows::fetched() const {
  std::lock_guard<std::mutex> l(mu_);
  return fetched_;
}

}  // namespace clf::fuse
