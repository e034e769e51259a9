// clf fsck: cross-server consistency of metadata and data objects
// (docs/ARCHITECTURE.md "fsck"). Scans every server (Admin.FsckScan, paged),
// decides findings from the whole picture, and with --repair applies
// conditional repairs (Admin.FsckRepair, Admin.RemoveObject) for findings seen
// in two consecutive scans, in rounds until a scan is clean.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
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

// Server k's pending renames not in `seen` yet, added to *s.
Status ReadRenames(client::FsckClient& fc, ServerId k, std::set<std::pair<ServerId, uint64_t>>* seen,
                   Snapshot* s) {
  CLF_ASSIGN_OR_RETURN(std::vector<FsckRename> rs, fc.Renames(k));
  for (FsckRename& r : rs) {
    if (!seen->insert({k, r.id}).second) continue;
    ++s->n_renames[k];
    s->renames.emplace_back(k, std::move(r));
  }
  return Status::Ok();
}

// Server k's entries, inodes, orphan and garbage records, added to *s (nothing
// added unless all four were read).
Status ReadMetadata(client::FsckClient& fc, ServerId k, Snapshot* s) {
  CLF_ASSIGN_OR_RETURN(std::vector<FsckEntry> es, fc.Entries(k));
  CLF_ASSIGN_OR_RETURN(std::vector<FsckInode> is, fc.Inodes(k));
  CLF_ASSIGN_OR_RETURN(std::vector<Handle> os, fc.Orphans(k));
  CLF_ASSIGN_OR_RETURN(std::vector<Handle> gs, fc.Garbage(k));
  s->n_entries[k] = es.size();
  s->n_inodes[k] = is.size();
  s->n_orphans[k] = os.size();
  s->n_garbage[k] = gs.size();
  s->entries[k] = std::move(es);
  for (FsckInode& i : is) s->inodes[i.handle] = i;
  s->orphans.insert(os.begin(), os.end());
  s->garbage.insert(gs.begin(), gs.end());
  return Status::Ok();
}

// Server k's data objects, added to *s.
Status ReadDataObjects(client::FsckClient& fc, ServerId k, Snapshot* s) {
  CLF_ASSIGN_OR_RETURN(std::vector<Handle> ds, fc.DataObjects(k));
  for (Handle h : ds) ++s->data_servers[h];
  s->data[k] = std::move(ds);
  return Status::Ok();
}

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
  // Runs `read` on every server still up; one that fails is down from then on.
  auto each_up = [&](const std::function<Status(ServerId)>& read) {
    for (ServerId k = 0; k < n; ++k) {
      if (!(*up)[k]) continue;
      if (Status st = read(k); !st.ok()) {
        std::fprintf(stderr, "clf: server %u: %s\n", k, st.ToString().c_str());
        (*up)[k] = false;
        all = false;
      }
    }
  };
  // Pending renames before and after the rest (the union): one pending while
  // the entries were read, whose two names they may show, is seen unless it
  // both started and ended during the scan (then a second scan tells).
  std::set<std::pair<ServerId, uint64_t>> seen;
  each_up([&](ServerId k) { return ReadRenames(fc, k, &seen, &s); });
  each_up([&](ServerId k) { return ReadMetadata(fc, k, &s); });
  // Data objects after every server's inodes and garbage records: a file's
  // removal writes its garbage record with the inode's deletion, and the
  // collector removes the objects before the record, so an object still
  // listed now was covered by an inode or a record read above. (Listing one
  // server's objects before another server's records let a collection that
  // finished in between show objects "without a file".)
  each_up([&](ServerId k) { return ReadDataObjects(fc, k, &s); });
  each_up([&](ServerId k) { return ReadRenames(fc, k, &seen, &s); });
  if (!all) return Unavailable("not every server answered");
  return Status::Ok();
}

Result<Snapshot> Scan(client::FsckClient& fc, std::vector<bool>* up) {
  Snapshot s;
  CLF_RETURN_IF_ERROR(ScanInto(fc, up, &s));
  return s;
}

// Decide's state: the findings so far, what pending renames explain, and the
// names counted per inode.
class Decider {
 public:
  explicit Decider(const Snapshot& s) : s_(s) {}
  std::vector<Finding> Run() {
    PendingRenames();
    Entries();
    Inodes();
    OrphanRecords();
    DataObjects();
    return std::move(out_);
  }

 private:
  // What pending renames explain: the renamed file or directory (named by
  // both its source and destination entries until the source settles), the
  // two directories' link counts, and a replaced file whose link drop waits.
  void PendingRenames() {
    for (const auto& [server, r] : s_.renames) {
      Finding f{};
      f.kind = r.link_drop ? Kind::kPendingLinkDrop : Kind::kPendingRename;
      f.server = server;
      f.handle = r.handle;
      f.rename = r;
      out_.push_back(f);
      explained_.insert(r.handle);
      if (!r.link_drop) {
        explained_.insert(r.src_parent);
        explained_.insert(r.dst_parent);
      }
    }
  }
  void Report(const Finding& f) {
    const bool transient = (f.kind == Kind::kWrongLinkCount || f.kind == Kind::kExtraDirEntry ||
                            f.kind == Kind::kInodeWithoutEntry) &&
                           explained_.count(f.handle) != 0;
    if (!transient) out_.push_back(f);
  }
  bool IsDir(Handle h) const {
    auto it = s_.inodes.find(h);
    return it != s_.inodes.end() && it->second.type == FileType::kDirectory;
  }
  uint32_t Refs(Handle h) const { return refs_.count(h) ? refs_.at(h) : 0; }
  // Entries: each names an inode in a directory; counts names and subdirectories.
  void Entries() {
    for (const auto& per : s_.entries) {
      for (const FsckEntry& e : per) {
        Finding f{};
        f.parent = e.parent;
        f.name = e.name;
        f.handle = e.handle;
        f.type = e.type;
        if (!IsDir(e.parent)) {
          f.kind = Kind::kEntryInMissingDir;
          Report(f);
          continue;
        }
        auto it = s_.inodes.find(e.handle);
        if (it == s_.inodes.end() || e.handle == kRootHandle) {
          f.kind = Kind::kEntryWithoutInode;
          Report(f);
          continue;
        }
        if (it->second.type == FileType::kDirectory) {
          if (refs_[e.handle] >= 1) {  // a directory has exactly one name: keep the first seen
            f.kind = Kind::kExtraDirEntry;
            Report(f);
            continue;
          }
          ++subdirs_[e.parent];
        }
        ++refs_[e.handle];
      }
    }
  }
  // Inodes: named, with the link count their names give, with their objects.
  void Inodes() {
    std::vector<Handle> handles;
    for (const auto& [h, i] : s_.inodes) handles.push_back(h);
    std::sort(handles.begin(), handles.end());
    for (Handle h : handles) {
      const FsckInode& i = s_.inodes.at(h);
      const bool orphan = s_.orphans.count(h) > 0;
      const uint32_t r = Refs(h);
      Finding f{};
      f.handle = h;
      f.type = i.type;
      if (h != kRootHandle && r == 0) {
        if (orphan && i.nlink == 0) continue;  // unlinked while open: awaits Destroy
        f.kind = Kind::kInodeWithoutEntry;
        f.expect_nlink = i.nlink;
        Report(f);
        continue;
      }
      const uint32_t want =
          i.type == FileType::kDirectory ? 2 + (subdirs_.count(h) ? subdirs_.at(h) : 0) : r;
      if (i.nlink != want) {
        f.kind = Kind::kWrongLinkCount;
        f.nlink = want;
        f.expect_nlink = i.nlink;
        Report(f);
      }
      if (i.type == FileType::kRegular && i.writers == 0 && i.blocks > 0 &&
          s_.data_servers.count(h) == 0) {
        Finding m{};
        m.kind = Kind::kObjectsMissing;
        m.handle = h;
        m.blocks = i.blocks;
        out_.push_back(m);
      }
    }
  }
  void OrphanRecords() {
    std::vector<Handle> orphans(s_.orphans.begin(), s_.orphans.end());
    std::sort(orphans.begin(), orphans.end());
    for (Handle h : orphans) {
      if (s_.inodes.count(h) == 0 || Refs(h) > 0) {
        Finding f{};
        f.kind = Kind::kStaleOrphanRecord;
        f.handle = h;
        Report(f);
      }
    }
  }
  void DataObjects() {
    for (ServerId k = 0; k < s_.data.size(); ++k) {
      for (Handle h : s_.data[k]) {
        // A removed file's objects wait for the garbage collector of its metadata server.
        if (s_.inodes.count(h) || s_.garbage.count(h)) continue;
        Finding f{};
        f.kind = Kind::kObjectWithoutInode;
        f.handle = h;
        f.server = k;
        out_.push_back(f);
      }
    }
  }

  const Snapshot& s_;
  std::vector<Finding> out_;
  std::unordered_set<Handle> explained_;
  std::unordered_map<Handle, uint32_t> refs_, subdirs_;
};

std::vector<Finding> Decide(const Snapshot& s) { return Decider(s).Run(); }

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
  // Run's steps. Scan and decide, then (--repair) repair what a second scan
  // confirms, up to kRounds times; the first round's findings are reported.
  Status RepairRounds();
  // The structural and count findings of `s` and (--copies) its copies'.
  Result<std::vector<Finding>> Findings(const Snapshot& s, CopyCounts* counts);
  // Of `f1`, what a second scan still shows; kUnavailable if it failed.
  Result<std::vector<Finding>> Confirm(const std::vector<Finding>& f1);
  // Pending renames first, alone; then structural repairs; then the counts.
  void ApplyConfirmed(const std::vector<Finding>& confirmed);
  // --repair: waits for the resync of the stale copies found or marked.
  Status AwaitResync();
  // What is left after the repairs (without --repair: the first findings).
  Result<std::vector<Finding>> Remaining();
  // The summary lines, the JSON and the exit code.
  void Report(const std::vector<Finding>& left);
  std::string PendingNote(uint64_t pending_found, uint64_t pending_left) const;
  void ReportCopies();

  const FsckArgs& a_;
  ClusterConfig cfg_;
  client::ClientOptions copts_;
  std::unique_ptr<client::FsckClient> fc_;
  std::unique_ptr<client::Client> meta_;  // lost+found lookup/creation
  Handle lost_found_ = 0;
  nlohmann::json json_ = nlohmann::json::object();
  int exit_code_ = 0;
  // What Run found and did.
  std::vector<bool> up_;
  std::vector<Finding> first_;  // the first round's findings
  std::map<std::string, uint64_t> found_by_kind_, repaired_by_kind_;
  nlohmann::json found_json_ = nlohmann::json::array();
  uint64_t repaired_ = 0, failed_ = 0, removed_objects_ = 0, settled_ = 0;
  CopyCounts copy_counts_;
  uint64_t stale_first_ = 0, stale_left_ = 0;
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
  CLF_RETURN_IF_ERROR(RepairRounds());
  CLF_RETURN_IF_ERROR(AwaitResync());
  CLF_ASSIGN_OR_RETURN(std::vector<Finding> left, Remaining());
  Report(left);
  if (a_.json) std::cout << json_.dump(2) << "\n";
  return Status::Ok();
}

Result<std::vector<Finding>> Fsck::Findings(const Snapshot& s, CopyCounts* counts) {
  std::vector<Finding> f = Decide(s);
  Result<std::vector<Finding>> cf = Copies(s, counts);
  if (!cf.ok()) {
    exit_code_ = 2;
    return cf.status().WithContext("comparing copies");
  }
  f.insert(f.end(), cf->begin(), cf->end());
  return f;
}

Status Fsck::RepairRounds() {
  constexpr int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    Snapshot snap;
    Status scanned = ScanInto(*fc_, &up_, &snap);
    if (round == 0) PrintTable(snap, up_);
    if (!scanned.ok()) {
      exit_code_ = 2;
      json_["error"] = "not every server answered";
      if (a_.json) std::cout << json_.dump(2) << "\n";
      return Unavailable(round == 0 ? "not every server answered: nothing can be decided; nothing changed"
                                    : "a server went down during fsck; stopped");
    }
    CopyCounts counts;
    CLF_ASSIGN_OR_RETURN(std::vector<Finding> f1, Findings(snap, &counts));
    if (round == 0) {
      copy_counts_ = counts;
      stale_first_ = ListStale(snap, true);
      first_ = f1;
      for (const Finding& f : f1) {
        ++found_by_kind_[KindName(f.kind)];
        found_json_.push_back({{"kind", KindName(f.kind)}, {"text", f.Text()}});
        Say(f.Text());
      }
    }
    if (f1.empty()) break;
    if (!a_.repair) break;
    if (round == kRounds - 1) break;
    CLF_ASSIGN_OR_RETURN(std::vector<Finding> confirmed, Confirm(f1));
    ApplyConfirmed(confirmed);
    if (failed_ > 0) break;
  }
  stale_left_ = stale_first_;
  return Status::Ok();
}

Result<std::vector<Finding>> Fsck::Confirm(const std::vector<Finding>& f1) {
  // Only what a second scan confirms: a change in flight during the first
  // (a create between its entry and its inode on two servers) is not a finding.
  Result<Snapshot> s2 = Scan(*fc_, &up_);
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
  return confirmed;
}

void Fsck::ApplyConfirmed(const std::vector<Finding>& confirmed) {
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
        ++settled_;
        Say("settled " + f.Text());
      } else if (st.code() != Code::kStale && st.code() != Code::kBusy) {
        // kStale: settled meanwhile; kBusy: its Rename call is still running.
        ++failed_;
        std::fprintf(stderr, "clf: settle %s: %s\n", f.Text().c_str(), st.ToString().c_str());
      }
      continue;
    }
    if (structural && !Structural(f.kind)) continue;  // counts change with the entries: next round
    Status st = Apply(f);
    if (st.ok()) {
      ++repaired_;
      ++repaired_by_kind_[KindName(f.kind)];
      if (f.kind == Kind::kObjectWithoutInode) ++removed_objects_;
      Say("repaired " + f.Text());
    } else {
      ++failed_;
      std::fprintf(stderr, "clf: repair %s: %s\n", f.Text().c_str(), st.ToString().c_str());
    }
  }
}

Status Fsck::AwaitResync() {
  // Stale copies are not problems (the file is degraded, the servers' resync
  // runs); --repair waits for the resync of those it found or marked.
  const bool marked = repaired_by_kind_.count(KindName(Kind::kCopyDiffers)) != 0;
  if (!a_.repair || (stale_first_ == 0 && !marked)) return Status::Ok();
  Say("waiting up to " + std::to_string(a_.resync_wait_s) + " s for the resync of stale copies");
  Result<uint64_t> w = WaitForResync(&up_);
  if (!w.ok()) {
    exit_code_ = 2;
    return Unavailable("a server went down during fsck");
  }
  stale_left_ = *w;
  return Status::Ok();
}

Result<std::vector<Finding>> Fsck::Remaining() {
  const bool marked = repaired_by_kind_.count(KindName(Kind::kCopyDiffers)) != 0;
  if (!a_.repair || (first_.empty() && !marked)) return first_;
  Result<Snapshot> s = Scan(*fc_, &up_);
  if (!s.ok()) {
    exit_code_ = 2;
    return Unavailable("a server went down during fsck");
  }
  CopyCounts ignored;
  CLF_ASSIGN_OR_RETURN(std::vector<Finding> left, Findings(*s, &ignored));
  for (const Finding& f : left) Say("still: " + f.Text());
  return left;
}

void Fsck::ReportCopies() {
  json_["copies"] = {{"files", copy_counts_.files},
                     {"compared", copy_counts_.copies},
                     {"bytes", copy_counts_.bytes},
                     {"skipped_open", copy_counts_.skipped_open},
                     {"skipped_changed", copy_counts_.skipped_changed}};
  Say("compared " + std::to_string(copy_counts_.copies) + " copies of " +
      std::to_string(copy_counts_.files) + " replicated file(s), " +
      std::to_string(copy_counts_.bytes) + " bytes" +
      (copy_counts_.skipped_open > 0
           ? "; " + std::to_string(copy_counts_.skipped_open) + " file(s) open for writing skipped"
           : ""));
}

// Pending renames and stale copies are not problems: every server up settles
// or resyncs them by itself.
std::string Fsck::PendingNote(uint64_t pending_found, uint64_t pending_left) const {
  std::string note;
  if (a_.repair && settled_ > 0) {
    note += "; settled " + std::to_string(settled_) + " pending rename(s)";
  }
  const uint64_t stale_now = a_.repair ? stale_left_ : stale_first_;
  if (stale_now > 0) {
    note += "; " + std::to_string(stale_now) +
            " stale cop" + (stale_now == 1 ? "y" : "ies") +
            " (degraded; the servers resync them in the background, `clf status` shows "
            "progress)";
  }
  if (a_.repair ? pending_left > 0 : pending_found > 0) {
    note += "; " + std::to_string(a_.repair ? pending_left : pending_found) +
            " cross-server rename(s) pending (settled by their servers in the background" +
            (a_.repair ? ")" : ", or now with --repair)");
  }
  return note;
}

void Fsck::Report(const std::vector<Finding>& left) {
  auto problems = [](const std::vector<Finding>& fs) {
    return static_cast<uint64_t>(
        std::count_if(fs.begin(), fs.end(), [](const Finding& f) { return !Pending(f.kind); }));
  };
  const uint64_t found = problems(first_), pending_found = first_.size() - found;
  const uint64_t remain = problems(left), pending_left = left.size() - remain;
  const uint64_t orphan_objects = found_by_kind_["object-without-inode"];
  json_["findings"] = found_json_;
  json_["found"] = found;
  json_["pending_renames"] = pending_found;
  json_["settled_renames"] = settled_;
  json_["repaired"] = repaired_;
  json_["remaining"] = remain;
  json_["clean"] = remain == 0;
  json_["stale_copies"] = stale_first_;
  if (a_.repair) json_["stale_copies_left"] = stale_left_;
  if (a_.copies) ReportCopies();
  const std::string pending_note = PendingNote(pending_found, pending_left);
  if (found == 0 && remain == 0) {
    Say("clean: no inconsistencies (no orphaned data objects)" + pending_note);
    if (failed_ > 0) exit_code_ = 1;
  } else if (!a_.repair) {
    if (orphan_objects > 0) Say(std::to_string(orphan_objects) + " orphaned data object(s)");
    Say(std::to_string(found) + " problem(s) found; run with --repair to repair them" +
        pending_note);
    exit_code_ = 1;
  } else {
    if (removed_objects_ > 0) {
      Say("removed " + std::to_string(removed_objects_) + " orphaned data object(s)");
    }
    Say("repaired " + std::to_string(repaired_) + " of " + std::to_string(found) +
        " problem(s) found" + (failed_ ? ", " + std::to_string(failed_) + " repair(s) failed" : "") +
        (remain == 0 ? "; now clean" : "; " + std::to_string(remain) + " remain") + pending_note);
    if (remain > 0 || failed_ > 0) exit_code_ = 1;
  }
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
