#include "fuse/pending_index.h"

#include <cstring>

namespace clf::fuse {

using client::CommitOp;

std::string PendingIndex::NameKey(Handle dir, const std::string& name) {
  std::string k(sizeof(dir), '\0');
  std::memcpy(k.data(), &dir, sizeof(dir));
  return k + name;
}

void PendingIndex::Dec(std::unordered_map<Handle, uint32_t>& m, Handle h) {
  auto it = m.find(h);
  if (it != m.end() && --it->second == 0) m.erase(it);
}

void PendingIndex::Add(const CommitOp& op, const std::vector<Handle>& touches) {
  for (Handle h : touches) ++touches_[h];
  if (op.parent != 0 && !op.name.empty()) ++names_[NameKey(op.parent, op.name)];
  if (op.new_parent != 0 && !op.new_name.empty()) ++names_[NameKey(op.new_parent, op.new_name)];
  if (op.kind == CommitOp::kSetAttr) ++attrs_[op.handle];
  if (op.kind == CommitOp::kRemove && !op.directory && op.handle != 0) ++unlinks_[op.handle];
  if (op.kind == CommitOp::kCreate && op.handle != 0) ++creates_[op.handle];
}

void PendingIndex::Remove(const CommitOp& op, const std::vector<Handle>& touches) {
  for (Handle h : touches) Dec(touches_, h);
  auto drop_name = [this](Handle dir, const std::string& name) {
    if (dir == 0 || name.empty()) return;
    auto it = names_.find(NameKey(dir, name));
    if (it != names_.end() && --it->second == 0) names_.erase(it);
  };
  drop_name(op.parent, op.name);
  drop_name(op.new_parent, op.new_name);
  if (op.kind == CommitOp::kSetAttr) Dec(attrs_, op.handle);
  if (op.kind == CommitOp::kRemove && !op.directory && op.handle != 0) Dec(unlinks_, op.handle);
  if (op.kind == CommitOp::kCreate && op.handle != 0) Dec(creates_, op.handle);
}

bool PendingIndex::TouchesBesidesUnlinks(Handle h) const {
  auto t = touches_.find(h);
  if (t == touches_.end()) return false;
  auto u = unlinks_.find(h);
  return u == unlinks_.end() || t->second > u->second;
}

bool PendingIndex::NameQueued(Handle dir, const std::string& name) const {
  return names_.count(NameKey(dir, name)) != 0;
}

}  // namespace clf::fuse
