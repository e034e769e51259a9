// libFuzzer harness: arbitrary bytes as a Peer request (first byte: which
// RPC), validated and served as PeerService would.
//
// Rename intents name the source server, another one than the receiver: a
// one-server cluster never accepts one. Selectors 6 (ResolveRename), 7
// (InsertEntry with any intent id) and 8 (ForgetRenames) are therefore
// validated as server 0 of a two-server cluster validates them; all are
// served locally (an InsertEntry whose file lives on server 1 would call
// that server, and is skipped). Selector 9 (Replicas) is validated and
// served as server 0 of a four-server cluster (replicated layouts need more
// than one server), and so is 11 (AnnounceStore); 10 (ReplicasChanged) is
// only validated (a holder drops a cached entry).
#include <cstdio>
#include <cstdlib>

#include "test/fuzz/fuzz_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clf;
  using namespace clf::fuzz;
  if (size < 1) return 0;
  FuzzServer& s = Server();
  const server::ClusterView two{2, 0};
  switch (data[0] % 12) {
    case 0: {
      v1::CollectiveRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      // One server: the whole collective is local and `done` runs before RunCollective returns.
      bool done = false;
      s.ops->RunCollective(r, [&done](v1::CollectiveReply) { done = true; });
      if (!done) std::abort();
      break;
    }
    case 1: {
      v1::MakeDirRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.ops->PeerMakeDir(r).IgnoreError();
      break;
    }
    case 2: {
      v1::RemoveDirRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.ops->PeerRemoveDir(r.handle()).IgnoreError();
      break;
    }
    case 3: {
      v1::AdjustLinkRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.ops->PeerAdjustLink(r).IgnoreError();
      break;
    }
    case 4: {
      v1::GetAttrsRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      std::vector<Handle> hs(r.handles().begin(), r.handles().end());
      s.ops->PeerGetAttrs(hs).IgnoreError();
      break;
    }
    case 5: {
      v1::InsertEntryRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, s.view).ok()) return 0;
      s.ops->PeerInsertEntry(r).IgnoreError();
      break;
    }
    case 6: {
      v1::ResolveRenameRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, two).ok()) return 0;
      Result<v1::ResolveRenameReply> a = s.ops->PeerResolveRename(r.intent_id());
      // Resolving twice gives the same answer: an intent once aborted stays aborted.
      Result<v1::ResolveRenameReply> b = s.ops->PeerResolveRename(r.intent_id());
      if (a.ok() && b.ok() && a->applied() != b->applied()) std::abort();
      break;
    }
    case 7: {
      v1::InsertEntryRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, two).ok()) return 0;
      // Entries here only ever name files of server 0 (every other request is
      // validated as a one-server cluster would), so a replaced file is local too.
      if (ServerOf(r.handle()) != 0) return 0;
      // Intent ids of server 1 are the ones a real cluster sends; ResolveRename
      // first (odd selector byte / 12) records it aborted, and InsertEntry must
      // then refuse it.
      const bool resolve_first = (data[0] / 12) & 1;
      bool aborted = false;
      if (resolve_first && r.intent_id() != 0 && ServerOf(r.intent_id()) == 1) {
        Result<v1::ResolveRenameReply> res = s.ops->PeerResolveRename(r.intent_id());
        aborted = res.ok() && !res->applied();
      }
      Result<v1::InsertEntryReply> ins = s.ops->PeerInsertEntry(r);
      if (aborted && ins.ok()) {
        std::fprintf(stderr,
                     "fuzz: InsertEntry applied intent %llx after ResolveRename aborted it\n",
                     static_cast<unsigned long long>(r.intent_id()));
        std::abort();
      }
      break;
    }
    case 9: {
      v1::ReplicasRequest r;
      const server::ClusterView four{4, 0};
      if (!ParseRest(data, size, &r) || !server::Validate(r, four).ok()) return 0;
      Result<v1::ReplicasReply> a = s.replica_state->Serve(r);
      // A mark is idempotent: repeating it changes nothing.
      if (a.ok() && r.op() != v1::REPLICAS_GET) {
        Result<v1::ReplicasReply> b = s.replica_state->Serve(r);
        if (!b.ok() || b->stale_size() != a->stale_size()) std::abort();
      }
      break;
    }
    case 11: {
      v1::AnnounceStoreRequest r;
      const server::ClusterView four{4, 0};
      if (!ParseRest(data, size, &r) || !server::Validate(r, four).ok()) return 0;
      s.replica_state->AnnounceStore(r.server(), r.fresh()).IgnoreError();
      break;
    }
    case 10: {
      v1::ReplicasChangedRequest r;
      if (!ParseRest(data, size, &r)) return 0;
      server::Validate(r, s.view).IgnoreError();
      break;
    }
    case 8: {
      v1::ForgetRenamesRequest r;
      if (!ParseRest(data, size, &r) || !server::Validate(r, two).ok()) return 0;
      // Forgetting is idempotent: a repeat finds nothing left to prune.
      Result<uint32_t> a = s.ops->PeerForgetRenames(r.settled_below());
      Result<uint32_t> b = s.ops->PeerForgetRenames(r.settled_below());
      if (a.ok() && b.ok() && *b != 0) {
        std::fprintf(stderr, "fuzz: ForgetRenames(%llx) pruned %u records twice\n",
                     static_cast<unsigned long long>(r.settled_below()), *b);
        std::abort();
      }
      break;
    }
  }
  return 0;
}
