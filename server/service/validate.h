// Request validation of clfd: every field of every request of the Meta, Data,
// Peer and Admin services, checked in one place per message before any ops/
// call. A request that passes may still fail in ops/ (a missing file, a
// permission), but never because a field is out of the range the code below
// it assumes: server ids < n, handles of real servers, names, sizes and
// offsets within the documented limits, layouts whose math cannot divide by
// zero, known flag bits only.
//
// The service adapters (services.cc) call Validate(request, view) first and
// answer the error as is; the fuzz harnesses (test/fuzz/) call the same
// functions before the ops layer.
// Thread safety: pure functions of their arguments.
#pragma once

#include <string_view>

#include "clf/v1/admin.pb.h"
#include "clf/v1/baseline.pb.h"
#include "clf/v1/data.pb.h"
#include "clf/v1/meta.pb.h"
#include "clf/v1/peer.pb.h"
#include "common/handle.h"
#include "common/status.h"

namespace clf::server {

// What a request is checked against: the cluster's size and this server's id.
struct ClusterView {
  uint32_t servers = 0;
  ServerId self = 0;
};

// Limits of the protocol that only the server side states.
inline constexpr int kMaxCallerGroups = 65536;  // NGROUPS_MAX on Linux
inline constexpr int kMaxCollectiveFiles = 1 << 16;
inline constexpr uint32_t kMaxCollectiveBudgetMs = 3'600'000;  // one hour
inline constexpr int kMaxGetAttrsHandles = 1 << 16;
inline constexpr size_t kMaxLeaseEntries = 1 << 16;  // larger directories get no lease
// SetAttrRequest.valid: the bits the protocol defines (see meta.proto).
inline constexpr uint32_t kSetAttrKnownBits = (v1::SetAttrBit_MAX << 1) - 1;

// The cluster secret compared in time independent of where the first
// difference is (the length of `expected` may leak, its content not).
bool SecretMatches(std::string_view presented, std::string_view expected);

// Meta
Status Validate(const v1::LookupRequest& r, const ClusterView& v);
Status Validate(const v1::GetAttrRequest& r, const ClusterView& v);  // GetAttr, Readlink
Status Validate(const v1::SetAttrRequest& r, const ClusterView& v);
Status Validate(const v1::CreateRequest& r, const ClusterView& v);
Status Validate(const v1::LinkRequest& r, const ClusterView& v);
Status Validate(const v1::RemoveRequest& r, const ClusterView& v);
Status Validate(const v1::RenameRequest& r, const ClusterView& v);
Status Validate(const v1::ReadDirRequest& r, const ClusterView& v);
Status Validate(const v1::DestroyRequest& r, const ClusterView& v);
Status Validate(const v1::ReportWriteRequest& r, const ClusterView& v);
Status Validate(const v1::DirLeaseRequest& r, const ClusterView& v);
Status Validate(const v1::CommitRequest& r, const ClusterView& v);  // each op as on its own
// Xattr requests share one message; what is required depends on the call.
enum class XattrCall { kGet, kSet, kList, kRemove };
Status Validate(const v1::XattrRequest& r, XattrCall call, const ClusterView& v);

// Data
Status Validate(const v1::WriteRequest& r, const ClusterView& v);
Status Validate(const v1::ReadRequest& r, const ClusterView& v);
Status Validate(const v1::SyncRequest& r, const ClusterView& v);

// Peer
Status Validate(const v1::CollectiveRequest& r, const ClusterView& v);
Status Validate(const v1::MakeDirRequest& r, const ClusterView& v);
Status Validate(const v1::RemoveDirRequest& r, const ClusterView& v);
Status Validate(const v1::AdjustLinkRequest& r, const ClusterView& v);
Status Validate(const v1::GetAttrsRequest& r, const ClusterView& v);
Status Validate(const v1::InsertEntryRequest& r, const ClusterView& v);
Status Validate(const v1::ResolveRenameRequest& r, const ClusterView& v);
Status Validate(const v1::ForgetRenamesRequest& r, const ClusterView& v);
Status Validate(const v1::ReplicasRequest& r, const ClusterView& v);
Status Validate(const v1::ReplicasChangedRequest& r, const ClusterView& v);
Status Validate(const v1::AnnounceStoreRequest& r, const ClusterView& v);

// Baseline (metadata_mode = "client"); Baseline.Unlink takes a RemoveRequest.
Status Validate(const v1::ReserveRequest& r, const ClusterView& v);
// Baseline.Create: a CreateRequest of a regular file with its reserved handle (of this server).
Status ValidateBaselineCreate(const v1::CreateRequest& r, const ClusterView& v);
Status Validate(const v1::ObjectRequest& r, const ClusterView& v);
Status Validate(const v1::StatObjectRequest& r, const ClusterView& v);

// Admin
Status Validate(const v1::StatusRequest& r, const ClusterView& v);
Status Validate(const v1::ListObjectsRequest& r, const ClusterView& v);
Status Validate(const v1::RemoveObjectRequest& r, const ClusterView& v);
inline constexpr uint32_t kMaxFsckPage = 16384;  // items per FsckScan reply
Status Validate(const v1::FsckScanRequest& r, const ClusterView& v);
Status Validate(const v1::FsckRepairRequest& r, const ClusterView& v);

}  // namespace clf::server
