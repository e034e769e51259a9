#include "test/fuzz/fuzz_server.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>

#include "common/log.h"

namespace clf::fuzz {
namespace {

// A cluster of one has no peers: validation must have refused any request
// that names another server, so a call here is a bug the fuzzer should report.
class TrapPeers final : public server::Peers {
 public:
  [[noreturn]] static void Trap(const char* what) {
    std::fprintf(stderr, "fuzz: a validated request reached Peers::%s in a one-server cluster\n",
                 what);
    std::abort();
  }
  void Collective(ServerId, const v1::CollectiveRequest&,
                  std::function<void(Status, v1::CollectiveReply)>) override {
    Trap("Collective");
  }
  Result<v1::Attr> MakeDir(ServerId, const v1::MakeDirRequest&) override { Trap("MakeDir"); }
  Status RemoveDir(ServerId, Handle) override { Trap("RemoveDir"); }
  Result<v1::AdjustLinkReply> AdjustLink(ServerId, const v1::AdjustLinkRequest&) override {
    Trap("AdjustLink");
  }
  Result<std::vector<v1::Attr>> GetAttrs(ServerId, const std::vector<Handle>&) override {
    Trap("GetAttrs");
  }
  Result<v1::InsertEntryReply> InsertEntry(ServerId, const v1::InsertEntryRequest&) override {
    Trap("InsertEntry");
  }
  Result<v1::ResolveRenameReply> ResolveRename(ServerId, const v1::ResolveRenameRequest&) override {
    Trap("ResolveRename");
  }
};

std::string* g_dir = nullptr;

void RemoveDir() {
  if (g_dir == nullptr) return;
  std::error_code ec;
  std::filesystem::remove_all(*g_dir, ec);
}

void Check(const Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "fuzz setup: %s: %s\n", what, s.ToString().c_str());
  std::abort();
}

FuzzServer* Make(MetadataMode mode) {
  // Errors only: a warning per refused request would dominate the run.
  log::Init("clf-fuzz", "error");
  auto* f = new FuzzServer();
  std::string tmpl = (std::filesystem::temp_directory_path() / "clf-fuzz-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  f->dir = tmpl;
  g_dir = new std::string(tmpl);
  std::atexit(RemoveDir);
  f->cluster.servers = {ServerConfig{0, "127.0.0.1:1", "", f->dir}};
  f->cluster.default_layout = Layout{4096, 1, 0, 1};
  f->cluster.metadata_mode = mode;
  auto store = server::RocksMetaStore::Open(f->dir + "/meta", false);
  Check(store.status(), "open rocksdb");
  f->store = std::move(*store);
  auto objects = server::ObjectStore::Open(f->dir + "/objects");
  Check(objects.status(), "open objects");
  f->objects = std::move(*objects);
  f->peers = std::make_unique<TrapPeers>();
  f->ops = std::make_unique<server::MetaOps>(f->cluster, 0, f->store.get(), f->objects.get(),
                                             f->peers.get());
  Check(f->ops->Init(), "init");
  f->client_mode = std::make_unique<server::ClientModeOps>(f->cluster, f->ops.get(), f->objects.get());
  f->client_mode->set_capability_key(kCapabilityKey);
  f->leases = std::make_unique<server::DirLeases>(60000);
  f->data = std::make_unique<server::DataOps>(f->objects.get(), f->store.get(), 0);
  // Replica state (Peer.Replicas): one server holds every copy; telling it is a no-op.
  f->replica_state = std::make_unique<server::ReplicaStateOps>(
      f->cluster, 0, f->store.get(), &f->ops->locks(),
      [](ServerId, Handle, std::function<void(Status)> done) { done(Status::Ok()); });
  // A small tree: handles 2.. are a directory, files, a symlink, with data and an xattr.
  auto create = [&](Handle parent, const char* name, v1::FileType t) {
    v1::CreateRequest r;
    r.set_parent(parent);
    r.set_name(name);
    r.set_type(t);
    r.set_mode(0755);
    if (t == v1::FT_SYMLINK) r.set_symlink_target("target");
    Result<v1::Attr> a = f->ops->Create(r);
    Check(a.status(), "create");
    return a->handle();
  };
  Handle d = create(kRootHandle, "dir", v1::FT_DIRECTORY);
  Handle file = create(kRootHandle, "file", v1::FT_REGULAR);
  create(d, "inner", v1::FT_REGULAR);
  create(d, "link", v1::FT_SYMLINK);
  v1::WriteRequest w;
  w.set_handle(file);
  w.add_extents()->set_length(5000);
  w.set_payload(std::string(5000, 'x'));
  Check(f->data->Write(w), "write");
  v1::XattrRequest x;
  x.set_handle(file);
  x.set_name("user.k");
  x.set_value("v");
  Check(f->ops->SetXattr(x), "setxattr");
  return f;
}

}  // namespace

FuzzServer& Server() {
  static FuzzServer* s = Make(MetadataMode::kOneHop);
  return *s;
}

FuzzServer& ClientModeServer() {
  static FuzzServer* s = Make(MetadataMode::kClient);
  return *s;
}

bool ParseRest(const uint8_t* data, size_t size, google::protobuf::Message* msg) {
  if (size < 1) return false;
  return msg->ParseFromArray(data + 1, static_cast<int>(size - 1));
}

}  // namespace clf::fuzz
