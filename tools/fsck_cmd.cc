// clf fsck: cross-server consistency of metadata and data objects
// (docs/ARCHITECTURE.md "fsck"). Scans every server (Admin.FsckScan, paged),
// decides findings from the whole picture, and with --repair applies
// conditional repairs (Admin.FsckRepair, Admin.RemoveObject) for findings seen
// in two consecutive scans, in rounds until a scan is clean.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "clf/client.h"
#include "clf/fsck_client.h"
#include "common/config.h"
#include "common/layout.h"
#include "tools/commands.h"
#include "tools/fsck_copies.h"

namespace clf::tools {
namespace {

using client::FileType;
using client::FsckEntry;
using client::FsckInode;
using client::FsckRename;

constexpr const char* kLostFound = "lost+found";

std::string Hex(Handle h) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Everything every server stores, as one scan saw it.
struct Snapshot {
  std::vector<std::vector<FsckEntry>> entries;  // per server
  std::unordered_map<Handle, FsckInode> inodes;
  std::unordered_set<Handle> orphans, garbage;
  std::vector<std::vector<Handle>> data;  // per server
  std::unordered_map<Handle, uint32_t> data_servers;  // handle -> servers holding an object
  std::vector<uint64_t> n_inodes, n_entries, n_orphans, n_garbage, n_renames;
  // Cross-server renames not settled yet, with the server that reported each.
  std::vector<std::pair<ServerId, FsckRename>> renames;
};

enum class Kind {
  kEntryWithoutInode,    // (a) the handle's server has no attributes for it
  kEntryInMissingDir,    // an entry of a directory that has no inode (left by a removal)
  kExtraDirEntry,        // a directory named by a second entry (an interrupted rename)
  kInodeWithoutEntry,    // (b) nlink > 0 (or no orphan record), reachable by no entry
  kWrongLinkCount,       // (d)
  kStaleOrphanRecord,    // an orphan record of a missing or linked inode
  kObjectsMissing,       // (e) blocks recorded, no data object anywhere
  kObjectWithoutInode,   // (c)
  // Not corruption: a cross-server rename not settled yet (an intent on its
  // source server, or a replaced file's link drop on the destination). The
  // states it explains (its file named twice, its directories' and the
  // replaced file's link counts) are not reported while it is pending;
  // --repair settles it as the servers' background settler does.
  kPendingRename,
  kPendingLinkDrop,
  // --copies: a current copy of a replicated file whose bytes differ from its
  // acting primary's (or that fails to read); --repair records it stale on
  // the file's metadata server and the servers' resync rewrites it.
  kCopyDiffers,
};

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kEntryWithoutInode: return "entry-without-inode";
    case Kind::kEntryInMissingDir: return "entry-in-missing-directory";
    case Kind::kExtraDirEntry: return "directory-with-several-entries";
    case Kind::kInodeWithoutEntry: return "inode-without-entry";
    case Kind::kWrongLinkCount: return "wrong-link-count";
    case Kind::kStaleOrphanRecord: return "stale-orphan-record";
    case Kind::kObjectsMissing: return "objects-missing";
    case Kind::kObjectWithoutInode: return "object-without-inode";
    case Kind::kPendingRename: return "pending-rename";
    case Kind::kPendingLinkDrop: return "pending-link-drop";
    case Kind::kCopyDiffers: return "copy-differs";
  }
  return "?";
}

bool Pending(Kind k) { return k == Kind::kPendingRename || k == Kind::kPendingLinkDrop; }

// Structural repairs change which entries exist; the counts are decided after them.
bool Structural(Kind k) {
  return k == Kind::kEntryWithoutInode || k == Kind::kEntryInMissingDir ||
         k == Kind::kExtraDirEntry || k == Kind::kInodeWithoutEntry;
}

struct Finding {
  Kind kind;
  Handle parent = 0;  // entries
  std::string name;
  Handle handle = 0;
  FileType type = FileType::kUnknown;
  ServerId server = 0;  // object-without-inode: where the object is; pending: who reported it
  uint32_t nlink = 0, expect_nlink = 0;
  uint64_t blocks = 0;
  FsckRename rename;  // pending-rename, pending-link-drop
  CopyDiff copy;      // copy-differs
  std::string Key() const {
    return std::to_string(static_cast<int>(kind)) + "/" + Hex(parent) + "/" + name + "/" +
           Hex(handle) + "/" + std::to_string(server) + "/" + std::to_string(nlink) + "/" +
           std::to_string(expect_nlink) + "/" + std::to_string(blocks) + "/" + Hex(rename.id) +
           "/" + std::to_string(copy.primary) + "/" + std::to_string(copy.slot);
  }
  std::string Text() const {
    std::string t = std::string(KindName(kind)) + ": ";
    switch (kind) {
      case Kind::kEntryWithoutInode:
      case Kind::kEntryInMissingDir:
      case Kind::kExtraDirEntry:
        return t + "entry '" + name + "' of directory " + Hex(parent) + " names " + Hex(handle);
      case Kind::kInodeWithoutEntry:
        return t + "inode " + Hex(handle) + " (nlink " + std::to_string(expect_nlink) +
               ") is named by no entry";
      case Kind::kWrongLinkCount:
        return t + "inode " + Hex(handle) + " has nlink " + std::to_string(expect_nlink) +
               ", should be " + std::to_string(nlink);
      case Kind::kStaleOrphanRecord:
        return t + "orphan record of " + Hex(handle) + " whose inode is missing or linked";
      case Kind::kObjectsMissing:
        return t + "file " + Hex(handle) + " records " + std::to_string(blocks) +
               " blocks but no server has a data object of it";
      case Kind::kObjectWithoutInode:
        return t + "data object " + Hex(handle) + " on server " + std::to_string(server) +
               " belongs to no file";
      case Kind::kPendingRename:
        return t + "rename " + Hex(rename.id) + " on server " + std::to_string(server) + ": '" +
               rename.src_name + "' of directory " + Hex(rename.src_parent) + " -> '" +
               rename.dst_name + "' of directory " + Hex(rename.dst_parent) + " (" +
               Hex(rename.handle) + ") " +
               (rename.in_flight ? "in progress"
                                 : "not settled yet (its source server settles it in the "
                                   "background)");
      case Kind::kPendingLinkDrop:
        return t + "file " + Hex(rename.handle) + ", replaced by rename " + Hex(rename.id) +
               ", still to lose that link (recorded on server " + std::to_string(server) + ")";
      case Kind::kCopyDiffers:
        return t + "file " + Hex(handle) + ": copy " + std::to_string(copy.slot) + " of server " +
               std::to_string(copy.primary) + "'s units (on server " + std::to_string(server) +
               ") " +
               (copy.error.empty()
                    ? "differs from copy " + std::to_string(copy.against) + " from byte " +
                          std::to_string(copy.offset) + " of the object"
                    : "fails to read: " + copy.error);
    }
    return t;
  }
};

// Fills *out (servers that answered) and *up; kUnavailable unless every server answered.
Status ScanInto(client::FsckClient& fc, std::vector<bool>* up, Snapshot* out) {
  const uint32_t n = fc.servers();
  Snapshot& s = *out;
  s = Snapshot{};
  s.entries.resize(n);
  s.data.resize(n);
  s.n_inodes.assign(n, 0);
  s.n_entries.assign(n, 0);
  s.n_orphans.assign(n, 0);
  s.n_garbage.assign(n, 0);
  s.n_renames.assign(n, 0);
  up->assign(n, true);
  bool all = true;
  // Pending renames before and after the rest (the union): one pending while
  // the entries were read, whose two names they may show, is seen unless it
  // both started and ended during the scan (then a second scan tells).
  std::set<std::pair<ServerId, uint64_t>> seen;
  auto scan_renames = [&](ServerId k) -> Status {
    CLF_ASSIGN_OR_RETURN(std::vector<FsckRename> rs, fc.Renames(k));
    for (FsckRename& r : rs) {
      if (!seen.insert({k, r.id}).second) continue;
      ++s.n_renames[k];
      s.renames.emplace_back(k, std::move(r));
    }
    return Status::Ok();
  };
  for (ServerId k = 0; k < n; ++k) {
    if (Status st = scan_renames(k); !st.ok()) {
      std::fprintf(stderr, "clf: server %u: %s\n", k, st.ToString().c_str());
      (*up)[k] = false;
      all = false;
    }
  }
  for (ServerId k = 0; k < n; ++k) {
    if (!(*up)[k]) continue;
    auto fail = [&](const Status& st) {
      std::fprintf(stderr, "clf: server %u: %s\n", k, st.ToString().c_str());
      (*up)[k] = false;
      all = false;
    };
    Result<std::vector<FsckEntry>> es = fc.Entries(k);
    if (!es.ok()) { fail(es.status()); continue; }
    Result<std::vector<FsckInode>> is = fc.Inodes(k);
    if (!is.ok()) { fail(is.status()); continue; }
    Result<std::vector<Handle>> os = fc.Orphans(k);
    if (!os.ok()) { fail(os.status()); continue; }
    Result<std::vector<Handle>> gs = fc.Garbage(k);
    if (!gs.ok()) { fail(gs.status()); continue; }
    s.n_entries[k] = es->size();
    s.n_inodes[k] = is->size();
    s.n_orphans[k] = os->size();
    s.n_garbage[k] = gs->size();
    s.entries[k] = std::move(*es);
    for (FsckInode& i : *is) s.inodes[i.handle] = i;
    s.orphans.insert(os->begin(), os->end());
    s.garbage.insert(gs->begin(), gs->end());
  }
  // Data objects after every server's inodes and garbage records: a file's
  // removal writes its garbage record with the inode's deletion, and the
  // collector removes the objects before the record, so an object still
  // listed now was covered by an inode or a record read above. (Listing one
  // server's objects before another server's records let a collection that
  // finished in between show objects "without a file".)
  for (ServerId k = 0; k < n; ++k) {
    if (!(*up)[k]) continue;
    Result<std::vector<Handle>> ds = fc.DataObjects(k);
    if (!ds.ok()) {
      std::fprintf(stderr, "clf: server %u: %s\n", k, ds.status().ToString().c_str());
      (*up)[k] = false;
      all = false;
      continue;
    }
    for (Handle h : *ds) ++s.data_servers[h];
    s.data[k] = std::move(*ds);
  }
  for (ServerId k = 0; k < n; ++k) {
    if (!(*up)[k]) continue;
    if (Status st = scan_renames(k); !st.ok()) {
      std::fprintf(stderr, "clf: server %u: %s\n", k, st.ToString().c_str());
      (*up)[k] = false;
      all = false;
    }
  }
  if (!all) return Unavailable("not every server answered");
  return Status::Ok();
}

Result<Snapshot> Scan(client::FsckClient& fc, std::vector<bool>* up) {
  Snapshot s;
  CLF_RETURN_IF_ERROR(ScanInto(fc, up, &s));
  return s;
}

std::vector<Finding> Decide(const Snapshot& s) {
  std::vector<Finding> out;
  // What pending renames explain: the renamed file or directory (named by
  // both its source and destination entries until the source settles), the
  // two directories' link counts, and a replaced file whose link drop waits.
  std::unordered_set<Handle> explained;
  for (const auto& [server, r] : s.renames) {
    Finding f{};
    f.kind = r.link_drop ? Kind::kPendingLinkDrop : Kind::kPendingRename;
    f.server = server;
    f.handle = r.handle;
    f.rename = r;
    out.push_back(f);
    explained.insert(r.handle);
    if (!r.link_drop) {
      explained.insert(r.src_parent);
      explained.insert(r.dst_parent);
    }
  }
  auto report = [&](const Finding& f) {
    const bool transient = (f.kind == Kind::kWrongLinkCount || f.kind == Kind::kExtraDirEntry ||
                            f.kind == Kind::kInodeWithoutEntry) &&
                           explained.count(f.handle) != 0;
    if (!transient) out.push_back(f);
  };
  auto is_dir = [&](Handle h) {
    auto it = s.inodes.find(h);
    return it != s.inodes.end() && it->second.type == FileType::kDirectory;
  };
  std::unordered_map<Handle, uint32_t> refs, subdirs;
  for (const auto& per : s.entries) {
    for (const FsckEntry& e : per) {
      Finding f{};
      f.parent = e.parent;
      f.name = e.name;
      f.handle = e.handle;
      f.type = e.type;
      if (!is_dir(e.parent)) {
        f.kind = Kind::kEntryInMissingDir;
        report(f);
        continue;
      }
      auto it = s.inodes.find(e.handle);
      if (it == s.inodes.end() || e.handle == kRootHandle) {
        f.kind = Kind::kEntryWithoutInode;
        report(f);
        continue;
      }
      if (it->second.type == FileType::kDirectory) {
        if (refs[e.handle] >= 1) {  // a directory has exactly one name: keep the first seen
          f.kind = Kind::kExtraDirEntry;
          report(f);
          continue;
        }
        ++subdirs[e.parent];
      }
      ++refs[e.handle];
    }
  }
  std::vector<Handle> handles;
  for (const auto& [h, i] : s.inodes) handles.push_back(h);
  std::sort(handles.begin(), handles.end());
  for (Handle h : handles) {
    const FsckInode& i = s.inodes.at(h);
    const bool orphan = s.orphans.count(h) > 0;
    const uint32_t r = refs.count(h) ? refs.at(h) : 0;
    Finding f{};
    f.handle = h;
    f.type = i.type;
    if (h != kRootHandle && r == 0) {
      if (orphan && i.nlink == 0) continue;  // unlinked while open: awaits Destroy
      f.kind = Kind::kInodeWithoutEntry;
      f.expect_nlink = i.nlink;
      report(f);
      continue;
    }
    const uint32_t want =
        i.type == FileType::kDirectory ? 2 + (subdirs.count(h) ? subdirs.at(h) : 0) : r;
    if (i.nlink != want) {
      f.kind = Kind::kWrongLinkCount;
      f.nlink = want;
      f.expect_nlink = i.nlink;
      report(f);
    }
    if (i.type == FileType::kRegular && i.writers == 0 && i.blocks > 0 &&
        s.data_servers.count(h) == 0) {
      Finding m{};
      m.kind = Kind::kObjectsMissing;
      m.handle = h;
      m.blocks = i.blocks;
      out.push_back(m);
    }
  }
  std::vector<Handle> orphans(s.orphans.begin(), s.orphans.end());
  std::sort(orphans.begin(), orphans.end());
  for (Handle h : orphans) {
    auto it = s.inodes.find(h);
    const uint32_t r = refs.count(h) ? refs.at(h) : 0;
    if (it == s.inodes.end() || r > 0) {
      Finding f{};
      f.kind = Kind::kStaleOrphanRecord;
      f.handle = h;
      report(f);
    }
  }
  for (ServerId k = 0; k < s.data.size(); ++k) {
    for (Handle h : s.data[k]) {
      // A removed file's objects wait for the garbage collector of its metadata server.
      if (s.inodes.count(h) || s.garbage.count(h)) continue;
      Finding f{};
      f.kind = Kind::kObjectWithoutInode;
      f.handle = h;
      f.server = k;
      out.push_back(f);
    }
  }
  return out;
}

struct FsckArgs {
  std::string cluster;
  bool repair = false;
  bool json = false;
  bool copies = false;          // compare replicated files' copies byte by byte
  uint32_t resync_wait_s = 60;  // --repair: how long to wait for stale copies' resync
  std::string tls_cert, tls_key;
};

// Acting as a server (repairs need the server role): the peer secret, or with
// TLS a server's certificate (--tls-cert/--tls-key, else the first server
// certificate whose key this host can read: run it on a server).
Result<client::ClientOptions> RepairCredential(const ClusterConfig& cfg, const FsckArgs& a) {
  client::ClientOptions o;
  if (!cfg.tls.enabled()) {
    if (cfg.peer_secret_file.empty())
      return Invalid("fsck --repair needs peer_secret_file in " + a.cluster);
    o.secret_file = cfg.peer_secret_file;
    return o;
  }
  if (!a.tls_cert.empty() || !a.tls_key.empty()) {
    o.tls_cert = a.tls_cert;
    o.tls_key = a.tls_key;
    return o;
  }
  for (ServerId k = 0; k < cfg.size(); ++k) {
    if (::access(cfg.ServerKeyPath(k).c_str(), R_OK) == 0) {
      o.tls_cert = cfg.ServerCertPath(k);
      o.tls_key = cfg.ServerKeyPath(k);
      return o;
    }
  }
  return Permission(
      "fsck --repair needs a server certificate: run it on a server host or pass "
      "--tls-cert/--tls-key");
}

class Fsck {
 public:
  Fsck(const FsckArgs& a, ClusterConfig cfg, client::ClientOptions copts)
      : a_(a), cfg_(std::move(cfg)), copts_(std::move(copts)) {}

  Status Run();
  int exit_code() const { return exit_code_; }  // 0 clean/repaired, 1 problems, 2 a server down

 private:
  void PrintTable(const Snapshot& s, const std::vector<bool>& up);
  Status Apply(const Finding& f);
  // --copies: the copies that differ from their acting primary, as findings.
  Result<std::vector<Finding>> Copies(const Snapshot& s, CopyCounts* counts);
  // Stale copies M records (not problems: the servers' resync runs), one line each.
  uint64_t ListStale(const Snapshot& s, bool say);
  // --repair: waits up to resync_wait_s for the stale copies to be resynced;
  // the number still stale.
  Result<uint64_t> WaitForResync(std::vector<bool>* up);
  Result<Handle> LostFound();
  void Say(const std::string& line) {
    if (!a_.json) std::printf("%s\n", line.c_str());
  }

  const FsckArgs& a_;
  ClusterConfig cfg_;
  client::ClientOptions copts_;
  std::unique_ptr<client::FsckClient> fc_;
  std::unique_ptr<client::Client> meta_;  // lost+found lookup/creation
  Handle lost_found_ = 0;
  nlohmann::json json_ = nlohmann::json::object();
  int exit_code_ = 0;
};

void Fsck::PrintTable(const Snapshot& s, const std::vector<bool>& up) {
  nlohmann::json servers = nlohmann::json::array();
  if (!a_.json) {
    std::printf("%-8s %10s %10s %10s %13s %10s\n", "server", "inodes", "entries", "data",
                "open-unlinked", "garbage");
  }
  for (ServerId k = 0; k < up.size(); ++k) {
    nlohmann::json j = {{"id", k}, {"up", static_cast<bool>(up[k])}};
    if (up[k]) {
      j["inodes"] = s.n_inodes[k];
      j["entries"] = s.n_entries[k];
      j["data_objects"] = s.data[k].size();
      j["orphans"] = s.n_orphans[k];
      j["garbage"] = s.n_garbage[k];
      j["pending_renames"] = s.n_renames[k];
    }
    servers.push_back(j);
    if (a_.json) continue;
    if (!up[k]) {
      std::printf("%-8u %10s\n", k, "DOWN");
    } else {
      std::printf("%-8u %10llu %10llu %10zu %13llu %10llu\n", k,
                  static_cast<unsigned long long>(s.n_inodes[k]),
                  static_cast<unsigned long long>(s.n_entries[k]), s.data[k].size(),
                  static_cast<unsigned long long>(s.n_orphans[k]),
                  static_cast<unsigned long long>(s.n_garbage[k]));
    }
  }
  json_["servers"] = servers;
}

Result<Handle> Fsck::LostFound() {
  if (lost_found_ != 0) return lost_found_;
  if (!meta_) {
    CLF_ASSIGN_OR_RETURN(meta_, client::Client::Open(cfg_, copts_));
  }
  Result<client::Attr> a = meta_->LookupSync(meta_->root(), kLostFound);
  if (!a.ok() && a.status().code() == Code::kNotFound) {
    client::CreateArgs d;
    d.type = FileType::kDirectory;
    d.mode = 0700;
    a = meta_->CreateSync(meta_->root(), kLostFound, d);
    if (a.ok()) Say("created /" + std::string(kLostFound));
  }
  if (!a.ok()) return a.status().WithContext("/lost+found");
  if (a->type != FileType::kDirectory) return Status(Code::kNotDir, "/lost+found is not a directory");
  lost_found_ = a->handle;
  return lost_found_;
}

Status Fsck::Apply(const Finding& f) {
  switch (f.kind) {
    case Kind::kEntryWithoutInode:
    case Kind::kEntryInMissingDir:
    case Kind::kExtraDirEntry:
      return fc_->RemoveEntry(f.parent, f.name, f.handle);
    case Kind::kInodeWithoutEntry: {
      CLF_ASSIGN_OR_RETURN(Handle lf, LostFound());
      if (f.handle == lf) return Status::Ok();
      // The link count is set by the next round (it counts this entry then).
      return fc_->AddEntry(lf, Hex(f.handle), f.handle, f.type);
    }
    case Kind::kWrongLinkCount:
      return fc_->SetNlink(f.handle, f.nlink, f.expect_nlink);
    case Kind::kStaleOrphanRecord:
      return fc_->DropOrphan(f.handle);
    case Kind::kObjectsMissing:
      return fc_->ClearBlocks(f.handle, f.blocks);
    case Kind::kObjectWithoutInode:
      return fc_->RemoveDataObject(f.server, f.handle);
    case Kind::kPendingRename:
    case Kind::kPendingLinkDrop:
      return fc_->SettleRename(f.server, f.rename.id);
    case Kind::kCopyDiffers:
      return fc_->MarkCopyStale(f.handle, f.copy.primary, f.copy.slot);
  }
  return Invalid("unknown finding");
}

Result<std::vector<Finding>> Fsck::Copies(const Snapshot& s, CopyCounts* counts) {
  std::vector<Finding> out;
  if (!a_.copies) return out;
  std::vector<FsckInode> files;
  for (const auto& [h, i] : s.inodes) files.push_back(i);
  std::sort(files.begin(), files.end(),
            [](const FsckInode& a, const FsckInode& b) { return a.handle < b.handle; });
  CLF_ASSIGN_OR_RETURN(std::vector<CopyDiff> diffs, CompareCopies(*fc_, files, counts));
  for (CopyDiff& d : diffs) {
    Finding f{};
    f.kind = Kind::kCopyDiffers;
    f.handle = d.handle;
    f.server = ReplicaServer(d.primary, d.slot, fc_->servers());
    f.copy = std::move(d);
    out.push_back(std::move(f));
  }
  return out;
}

// A copy finding still holds in a later scan: the file unchanged, without
// writers, and the copy still current.
bool CopyStillApplies(const Snapshot& s, const Finding& f) {
  auto it = s.inodes.find(f.handle);
  if (it == s.inodes.end()) return false;
  const FsckInode& i = it->second;
  return i.writers == 0 && i.size == f.copy.size && !IsStale(i, f.copy.primary, f.copy.slot);
}

uint64_t Fsck::ListStale(const Snapshot& s, bool say) {
  std::vector<Handle> hs;
  for (const auto& [h, i] : s.inodes) {
    if (!i.stale.empty()) hs.push_back(h);
  }
  std::sort(hs.begin(), hs.end());
  uint64_t count = 0;
  for (Handle h : hs) {
    for (const auto& [primary, slot] : s.inodes.at(h).stale) {
      ++count;
      if (say) {
        Say("stale-copy: file " + Hex(h) + ": copy " + std::to_string(slot) + " of server " +
            std::to_string(primary) + "'s units (on server " +
            std::to_string(ReplicaServer(primary, slot, fc_->servers())) +
            ") missed writes; the servers resync it in the background");
      }
    }
  }
  return count;
}

Result<uint64_t> Fsck::WaitForResync(std::vector<bool>* up) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::seconds(a_.resync_wait_s);
  for (;;) {
    CLF_ASSIGN_OR_RETURN(Snapshot s, Scan(*fc_, up));
    const uint64_t stale = ListStale(s, false);
    if (stale == 0 || std::chrono::steady_clock::now() >= until) return stale;
    // The servers' resync pass runs every 2 s; ask again once a second.
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

Status Fsck::Run() {
  CLF_ASSIGN_OR_RETURN(fc_, client::FsckClient::Open(cfg_, copts_));
  std::vector<bool> up;
  std::map<std::string, uint64_t> found_by_kind, repaired_by_kind;
  nlohmann::json found_json = nlohmann::json::array();
  uint64_t repaired = 0, failed = 0, removed_objects = 0, settled = 0;
  std::vector<Finding> first;
  CopyCounts copy_counts;
  uint64_t stale_first = 0;
  constexpr int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    Snapshot snap;
    Status scanned = ScanInto(*fc_, &up, &snap);
    if (round == 0) PrintTable(snap, up);
    if (!scanned.ok()) {
      exit_code_ = 2;
      json_["error"] = "not every server answered";
      if (a_.json) std::cout << json_.dump(2) << "\n";
      return Unavailable(round == 0 ? "not every server answered: nothing can be decided; nothing changed"
                                    : "a server went down during fsck; stopped");
    }
    std::vector<Finding> f1 = Decide(snap);
    {
      CopyCounts counts;
      Result<std::vector<Finding>> cf = Copies(snap, &counts);
      if (!cf.ok()) {
        exit_code_ = 2;
        return cf.status().WithContext("comparing copies");
      }
      f1.insert(f1.end(), cf->begin(), cf->end());
      if (round == 0) {
        copy_counts = counts;
        stale_first = ListStale(snap, true);
      }
    }
    if (round == 0) {
      first = f1;
      for (const Finding& f : f1) {
        ++found_by_kind[KindName(f.kind)];
        found_json.push_back({{"kind", KindName(f.kind)}, {"text", f.Text()}});
        Say(f.Text());
      }
    }
    if (f1.empty()) break;
    if (!a_.repair) break;
    if (round == kRounds - 1) break;
    // Only what a second scan confirms: a change in flight during the first
    // (a create between its entry and its inode on two servers) is not a finding.
    Result<Snapshot> s2 = Scan(*fc_, &up);
    if (!s2.ok()) {
      exit_code_ = 2;
      return Unavailable("a server went down during fsck; stopped");
    }
    std::set<std::string> keys;
    for (const Finding& f : f1) keys.insert(f.Key());
    std::vector<Finding> confirmed;
    for (const Finding& f : Decide(*s2)) {
      if (keys.count(f.Key())) confirmed.push_back(f);
    }
    // Copy findings were read twice already; the second scan must still show
    // the file unchanged and the copy current.
    for (const Finding& f : f1) {
      if (f.kind == Kind::kCopyDiffers && CopyStillApplies(*s2, f)) confirmed.push_back(f);
    }
    // Pending renames first, alone: settling them changes entries and counts
    // they explained. Then structural repairs, then the counts.
    const bool pending = std::any_of(confirmed.begin(), confirmed.end(),
                                     [](const Finding& f) { return Pending(f.kind); });
    const bool structural = std::any_of(confirmed.begin(), confirmed.end(),
                                        [](const Finding& f) { return Structural(f.kind); });
    for (const Finding& f : confirmed) {
      if (pending) {
        if (!Pending(f.kind)) continue;
        Status st = Apply(f);
        if (st.ok()) {
          ++settled;
          Say("settled " + f.Text());
        } else if (st.code() != Code::kStale && st.code() != Code::kBusy) {
          // kStale: settled meanwhile; kBusy: its Rename call is still running.
          ++failed;
          std::fprintf(stderr, "clf: settle %s: %s\n", f.Text().c_str(), st.ToString().c_str());
        }
        continue;
      }
      if (structural && !Structural(f.kind)) continue;  // counts change with the entries: next round
      Status st = Apply(f);
      if (st.ok()) {
        ++repaired;
        ++repaired_by_kind[KindName(f.kind)];
        if (f.kind == Kind::kObjectWithoutInode) ++removed_objects;
        Say("repaired " + f.Text());
      } else {
        ++failed;
        std::fprintf(stderr, "clf: repair %s: %s\n", f.Text().c_str(), st.ToString().c_str());
      }
    }
    if (failed > 0) break;
  }
  // Stale copies are not problems (the file is degraded, the servers' resync
  // runs); --repair waits for the resync of those it found or marked.
  uint64_t stale_left = stale_first;
  const bool marked = repaired_by_kind.count(KindName(Kind::kCopyDiffers)) != 0;
  if (a_.repair && (stale_first > 0 || marked)) {
    Say("waiting up to " + std::to_string(a_.resync_wait_s) + " s for the resync of stale copies");
    Result<uint64_t> w = WaitForResync(&up);
    if (!w.ok()) {
      exit_code_ = 2;
      return Unavailable("a server went down during fsck");
    }
    stale_left = *w;
  }
  // What is left after the repairs.
  std::vector<Finding> left;
  if (a_.repair && (!first.empty() || marked)) {
    Result<Snapshot> s = Scan(*fc_, &up);
    if (!s.ok()) {
      exit_code_ = 2;
      return Unavailable("a server went down during fsck");
    }
    left = Decide(*s);
    CopyCounts ignored;
    Result<std::vector<Finding>> cf = Copies(*s, &ignored);
    if (!cf.ok()) {
      exit_code_ = 2;
      return cf.status().WithContext("comparing copies");
    }
    left.insert(left.end(), cf->begin(), cf->end());
    for (const Finding& f : left) Say("still: " + f.Text());
  } else {
    left = first;
  }
  auto problems = [](const std::vector<Finding>& fs) {
    return static_cast<uint64_t>(
        std::count_if(fs.begin(), fs.end(), [](const Finding& f) { return !Pending(f.kind); }));
  };
  const uint64_t found = problems(first), pending_found = first.size() - found;
  const uint64_t remain = problems(left), pending_left = left.size() - remain;
  uint64_t orphan_objects = found_by_kind["object-without-inode"];
  json_["findings"] = found_json;
  json_["found"] = found;
  json_["pending_renames"] = pending_found;
  json_["settled_renames"] = settled;
  json_["repaired"] = repaired;
  json_["remaining"] = remain;
  json_["clean"] = remain == 0;
  json_["stale_copies"] = stale_first;
  if (a_.repair) json_["stale_copies_left"] = stale_left;
  if (a_.copies) {
    json_["copies"] = {{"files", copy_counts.files},
                       {"compared", copy_counts.copies},
                       {"bytes", copy_counts.bytes},
                       {"skipped_open", copy_counts.skipped_open},
                       {"skipped_changed", copy_counts.skipped_changed}};
    Say("compared " + std::to_string(copy_counts.copies) + " copies of " +
        std::to_string(copy_counts.files) + " replicated file(s), " +
        std::to_string(copy_counts.bytes) + " bytes" +
        (copy_counts.skipped_open > 0
             ? "; " + std::to_string(copy_counts.skipped_open) + " file(s) open for writing skipped"
             : ""));
  }
  // Pending renames are not problems: every server up settles them by itself.
  std::string pending_note;
  if (a_.repair && settled > 0) {
    pending_note += "; settled " + std::to_string(settled) + " pending rename(s)";
  }
  const uint64_t stale_now = a_.repair ? stale_left : stale_first;
  if (stale_now > 0) {
    pending_note += "; " + std::to_string(stale_now) +
                    " stale cop" + (stale_now == 1 ? "y" : "ies") +
                    " (degraded; the servers resync them in the background, `clf status` shows "
                    "progress)";
  }
  if (a_.repair ? pending_left > 0 : pending_found > 0) {
    pending_note += "; " + std::to_string(a_.repair ? pending_left : pending_found) +
                    " cross-server rename(s) pending (settled by their servers in the background" +
                    (a_.repair ? ")" : ", or now with --repair)");
  }
  if (found == 0 && remain == 0) {
    Say("clean: no inconsistencies (no orphaned data objects)" + pending_note);
    if (failed > 0) exit_code_ = 1;
  } else if (!a_.repair) {
    if (orphan_objects > 0) Say(std::to_string(orphan_objects) + " orphaned data object(s)");
    Say(std::to_string(found) + " problem(s) found; run with --repair to repair them" +
        pending_note);
    exit_code_ = 1;
  } else {
    if (removed_objects > 0) Say("removed " + std::to_string(removed_objects) + " orphaned data object(s)");
    Say("repaired " + std::to_string(repaired) + " of " + std::to_string(found) +
        " problem(s) found" + (failed ? ", " + std::to_string(failed) + " repair(s) failed" : "") +
        (remain == 0 ? "; now clean" : "; " + std::to_string(remain) + " remain") + pending_note);
    if (remain > 0 || failed > 0) exit_code_ = 1;
  }
  if (a_.json) std::cout << json_.dump(2) << "\n";
  return Status::Ok();
}

Status DoFsck(const FsckArgs& a, int* exit_code) {
  if (a.cluster.empty()) return Invalid("no cluster file: pass --cluster FILE or set CLF_CLUSTER");
  CLF_ASSIGN_OR_RETURN(ClusterConfig cfg, LoadClusterConfig(a.cluster));
  client::ClientOptions copts;
  if (a.repair) {
    CLF_ASSIGN_OR_RETURN(copts, RepairCredential(cfg, a));
  }
  Fsck f(a, std::move(cfg), std::move(copts));
  Status st = f.Run();
  *exit_code = f.exit_code();
  return st;
}

}  // namespace

void AddFsckCommand(CLI::App& app) {
  auto fa = std::make_shared<FsckArgs>();
  CLI::App* cmd = app.add_subcommand(
      "fsck",
      "check entries, inodes, link counts, orphan records and data objects across the servers "
      "(exit 0 clean/repaired, 1 problems, 2 a server down)");
  cmd->add_option("--cluster", fa->cluster, "cluster file (default: $CLF_CLUSTER)")
      ->envname("CLF_CLUSTER");
  cmd->add_flag("--repair", fa->repair,
                "repair what is found (needs the peer secret or a server certificate)");
  cmd->add_flag("--json", fa->json, "JSON output");
  cmd->add_flag("--copies", fa->copies,
                "also compare every current copy of replicated files with its acting primary, "
                "byte by byte (reads all their data)");
  cmd->add_option("--resync-wait", fa->resync_wait_s,
                  "with --repair: seconds to wait for stale copies to be resynced (default 60)");
  cmd->add_option("--tls-cert", fa->tls_cert, "with TLS and --repair: a server certificate");
  cmd->add_option("--tls-key", fa->tls_key, "with TLS and --repair: its key");
  cmd->callback([fa] {
    int code = 0;
    Status st = DoFsck(*fa, &code);
    if (!st.ok()) {
      std::cerr << "clf: " << st.ToString() << "\n";
      if (code == 0) code = 1;
    }
    Exit(code);
  });
}

}  // namespace clf::tools
