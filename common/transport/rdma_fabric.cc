#include "common/transport/rdma_fabric.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace clf::transport::rdma {

namespace {

constexpr int kSliceMs = 100;  // longest single wait: bounds how late a stop or disconnect is seen
constexpr size_t kMaxOpBytes = 1u << 30;
constexpr size_t kRmaWindow = 16;

int SliceMs(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return kSliceMs;
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(left, kSliceMs));
}

// Retries a post that the provider refuses with FI_EAGAIN (its queue is full)
// while completions drain.
template <typename Post>
Status Posted(Post post, const char* what) {
  for (int i = 0;; ++i) {
    ssize_t rc = post();
    if (rc == 0) return Status::Ok();
    if (rc != -FI_EAGAIN || i > 100000) return FiError(rc, what);
    ::usleep(10);
  }
}

}  // namespace

Status FiError(ssize_t rc, const std::string& what) {
  const int e = static_cast<int>(rc < 0 ? -rc : rc);
  const std::string msg = "rdma " + what + ": " + fi_strerror(e);
  switch (e) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_ESHUTDOWN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ENODATA:
    case FI_EADDRNOTAVAIL:
      return Unavailable(msg);
    case FI_ETIMEDOUT:
    case FI_EAGAIN:
      return Status(Code::kTimedOut, msg);
    case FI_ECANCELED:
      return Status(Code::kCancelled, msg);
    default:
      return IoError(msg);
  }
}

std::vector<std::string> ProviderCandidates(const std::string& rdma_provider) {
  if (rdma_provider.empty() || rdma_provider == "auto") return {"verbs", "tcp"};
  return {rdma_provider};
}

Result<InfoPtr> GetInfo(const std::string& provider, const std::string& node,
                        const std::string& service, bool source) {
  InfoPtr hints(fi_allocinfo());
  if (!hints) return Status(Code::kInternal, "fi_allocinfo failed");
  hints->ep_attr->type = FI_EP_MSG;
  hints->caps = FI_MSG | FI_RMA;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;  // every operation passes its own fi_context2
  // The modes this code handles; the provider keeps the ones it needs (tcp in
  // 1.17: none; verbs: local, virt_addr, allocated, prov_key).
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_SAFE;
  hints->fabric_attr->prov_name = ::strdup(provider.c_str());
  fi_info* list = nullptr;
  int rc = fi_getinfo(FI_VERSION(1, 17), node.empty() ? nullptr : node.c_str(),
                      service.empty() ? nullptr : service.c_str(), source ? FI_SOURCE : 0,
                      hints.get(), &list);
  if (rc != 0) return FiError(rc, "provider " + provider + " at " + node + ":" + service);
  InfoPtr all(list);
  for (fi_info* i = list; i != nullptr; i = i->next) {
    // Only the core provider itself (not a utility provider layered over it).
    if (provider == i->fabric_attr->prov_name) {
      InfoPtr one(fi_dupinfo(i));
      if (!one) return Status(Code::kInternal, "fi_dupinfo failed");
      return one;
    }
  }
  return Unavailable("rdma: provider " + provider + " offers no FI_EP_MSG + FI_RMA endpoint at " +
                     node + ":" + service);
}

// ---------------------------------------------------------------- Domain

Result<std::shared_ptr<Domain>> Domain::Open(InfoPtr info) {
  std::shared_ptr<Domain> d(new Domain());
  d->info_ = std::move(info);
  fid_fabric* fabric = nullptr;
  int rc = fi_fabric(d->info_->fabric_attr, &fabric, nullptr);
  if (rc != 0) return FiError(rc, "fi_fabric");
  d->fabric_.reset(fabric);
  fid_domain* domain = nullptr;
  rc = fi_domain(fabric, d->info_.get(), &domain, nullptr);
  if (rc != 0) return FiError(rc, "fi_domain");
  d->domain_.reset(domain);
  return d;
}

Domain::~Domain() {
  domain_.reset();
  fabric_.reset();
}

bool Domain::PinsMemory() const {
  const std::string p = provider();
  return p != "tcp" && p != "sockets" && p != "udp" && p != "net";
}

Result<std::shared_ptr<MemoryRegion>> Domain::Register(const void* addr, size_t len,
                                                       uint64_t access) {
  const uint64_t mode = info_->domain_attr->mr_mode;
  auto r = std::make_shared<MemoryRegion>();
  r->base = reinterpret_cast<uintptr_t>(addr);
  r->len = len;
  r->access = access;
  r->virt_addr = (mode & FI_MR_VIRT_ADDR) != 0;
  const uint64_t requested_key =
      (mode & FI_MR_PROV_KEY) != 0 ? 0 : next_key_.fetch_add(1, std::memory_order_relaxed);
  fid_mr* mr = nullptr;
  int rc = fi_mr_reg(domain_.get(), addr, len, access, 0, requested_key, 0, &mr, nullptr);
  if (rc != 0) return FiError(rc, "fi_mr_reg of " + std::to_string(len) + " bytes");
  r->mr.reset(mr);
  r->desc = fi_mr_desc(mr);
  r->key = fi_mr_key(mr);
  if (r->key == FI_KEY_NOTAVAIL)
    return IoError("rdma: the provider gave no key for a registration");
  return r;
}

// ---------------------------------------------------------------- RegistrationCache

Result<std::shared_ptr<MemoryRegion>> RegistrationCache::Get(const void* addr, size_t len,
                                                             uint64_t access) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (max_entries_ > 0) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if ((*it)->Covers(a, len, access)) {
        if (it != lru_.begin()) lru_.splice(lru_.begin(), lru_, it);
        hits_.fetch_add(1, std::memory_order_relaxed);
        return lru_.front();
      }
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  // Whole pages: neighbouring buffers on the same pages then hit.
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t start = a & ~(page - 1);
  const uintptr_t end = (a + len + page - 1) & ~(page - 1);
  CLF_ASSIGN_OR_RETURN(std::shared_ptr<MemoryRegion> r,
                       domain_->Register(reinterpret_cast<void*>(start), end - start, access));
  if (max_entries_ == 0) return r;
  std::lock_guard<std::mutex> l(mu_);
  lru_.push_front(r);
  bytes_ += r->len;
  while (lru_.size() > 1 && (lru_.size() > max_entries_ || bytes_ > max_bytes_)) {
    bytes_ -= lru_.back()->len;
    lru_.pop_back();  // deregistered once no request holds it
  }
  return r;
}

size_t RegistrationCache::entries() const {
  std::lock_guard<std::mutex> l(mu_);
  return lru_.size();
}

// ---------------------------------------------------------------- Endpoint

Endpoint::~Endpoint() {
  // The endpoint first: no operation may touch a buffer or registration after
  // this. fi_shutdown tells the peer (FI_SHUTDOWN on its event queue).
  if (ep_ && connected_) fi_shutdown(ep_.get(), 0);
  ep_.reset();
  cq_.reset();
  eq_.reset();
  send_mr_.reset();
  recv_mr_.reset();
}

Status Endpoint::Open(const fi_info* info) {
  fi_eq_attr eq_attr{};
  eq_attr.size = 16;
  eq_attr.wait_obj = FI_WAIT_UNSPEC;
  fid_eq* eq = nullptr;
  int rc = fi_eq_open(domain_->fabric(), &eq_attr, &eq, nullptr);
  if (rc != 0) return FiError(rc, "fi_eq_open");
  eq_.reset(eq);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_MSG;
  cq_attr.wait_obj = FI_WAIT_UNSPEC;
  cq_attr.size = 2 * kRmaWindow + 8;
  fid_cq* cq = nullptr;
  rc = fi_cq_open(domain_->domain(), &cq_attr, &cq, nullptr);
  if (rc != 0) return FiError(rc, "fi_cq_open");
  cq_.reset(cq);
  fid_ep* ep = nullptr;
  rc = fi_endpoint(domain_->domain(), const_cast<fi_info*>(info), &ep, nullptr);
  if (rc != 0) return FiError(rc, "fi_endpoint");
  ep_.reset(ep);
  if ((rc = fi_ep_bind(ep, &eq->fid, 0)) != 0) return FiError(rc, "bind event queue");
  if ((rc = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) != 0) {
    return FiError(rc, "bind completion queue");
  }
  if ((rc = fi_enable(ep)) != 0) return FiError(rc, "fi_enable");
  send_buf_.resize(kMaxMessageBytes);
  recv_buf_.resize(kMaxMessageBytes);
  CLF_ASSIGN_OR_RETURN(send_mr_, domain_->Register(send_buf_.data(), send_buf_.size(), FI_SEND));
  CLF_ASSIGN_OR_RETURN(recv_mr_, domain_->Register(recv_buf_.data(), recv_buf_.size(), FI_RECV));
  size_t window = std::min<size_t>(kRmaWindow, std::max<size_t>(1, info->tx_attr->size / 2));
  rma_ctx_.assign(window, fi_context2{});
  free_slots_.clear();
  for (size_t i = 0; i < window; ++i) free_slots_.push_back(i);
  rma_iov_limit_ = std::max<size_t>(1, info->tx_attr->rma_iov_limit);
  max_op_bytes_ =
      std::min<size_t>(kMaxOpBytes, std::max<size_t>(4096, info->ep_attr->max_msg_size));
  return PostRecv();  // before connecting: the peer's first message finds it
}

Status Endpoint::WaitConnected(Clock::time_point deadline) {
  for (;;) {
    uint32_t event = 0;
    uint8_t buf[sizeof(fi_eq_cm_entry) + 256];
    ssize_t n = fi_eq_sread(eq_.get(), &event, buf, sizeof buf, SliceMs(deadline), 0);
    if (n >= 0) {
      if (event == FI_CONNECTED) {
        connected_ = true;
        return Status::Ok();
      }
      if (event == FI_SHUTDOWN) return Unavailable("rdma: peer closed the connection");
      continue;
    }
    if (n == -FI_EAVAIL) {
      fi_eq_err_entry err{};
      fi_eq_readerr(eq_.get(), &err, 0);
      return FiError(err.err != 0 ? err.err : FI_ECONNREFUSED, "connect");
    }
    if (n != -FI_EAGAIN && n != -FI_ETIMEDOUT) return FiError(n, "fi_eq_sread");
    if (Clock::now() >= deadline) return Status(Code::kTimedOut, "rdma: connect timed out");
    if (stop_ != nullptr && stop_->load()) return Status(Code::kCancelled, "rdma: stopping");
  }
}

Status Endpoint::Connect(Clock::time_point deadline) {
  int rc = fi_connect(ep_.get(), domain_->info()->dest_addr, nullptr, 0);
  if (rc != 0) return FiError(rc, "fi_connect");
  return WaitConnected(deadline);
}

Status Endpoint::Accept(Clock::time_point deadline) {
  int rc = fi_accept(ep_.get(), nullptr, 0);
  if (rc != 0) return FiError(rc, "fi_accept");
  return WaitConnected(deadline);
}

Status Endpoint::CheckEvents() {
  uint32_t event = 0;
  uint8_t buf[sizeof(fi_eq_cm_entry) + 256];
  ssize_t n = fi_eq_read(eq_.get(), &event, buf, sizeof buf, 0);
  if (n >= 0 && event == FI_SHUTDOWN) {
    broken_ = true;
    return Unavailable("rdma: peer closed the connection");
  }
  if (n == -FI_EAVAIL) {
    fi_eq_err_entry err{};
    fi_eq_readerr(eq_.get(), &err, 0);
    broken_ = true;
    return FiError(err.err != 0 ? err.err : FI_ECONNRESET, "connection");
  }
  return Status::Ok();
}

Status Endpoint::Pump(Clock::time_point deadline) {
  if (broken_) return Unavailable("rdma: endpoint failed earlier");
  for (;;) {
    fi_cq_msg_entry e{};
    ssize_t n = fi_cq_sread(cq_.get(), &e, 1, nullptr, SliceMs(deadline));
    if (n == 1) {
      if (e.op_context == &send_ctx_) {
        send_done_ = true;
      } else if (e.op_context == &recv_ctx_) {
        recv_done_ = true;
        recv_posted_ = false;
        recv_len_ = e.len;
      } else {
        auto* c = static_cast<fi_context2*>(e.op_context);
        if (c >= rma_ctx_.data() && c < rma_ctx_.data() + rma_ctx_.size()) {
          free_slots_.push_back(static_cast<size_t>(c - rma_ctx_.data()));
          --rma_outstanding_;
        }
      }
      return Status::Ok();
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      fi_cq_readerr(cq_.get(), &err, 0);
      broken_ = true;
      const char* what = err.op_context == &recv_ctx_   ? "receive"
                         : err.op_context == &send_ctx_ ? "send"
                                                        : "RMA";
      // A dropped connection flushes the posted operations as canceled.
      if (err.err == FI_ECANCELED && (stop_ == nullptr || !stop_->load())) {
        return Unavailable(std::string("rdma ") + what + ": connection closed by peer");
      }
      if (err.op_context == &recv_ctx_ && err.err == FI_ETRUNC) {
        return Invalid("rdma: message larger than " + std::to_string(kMaxMessageBytes) + " bytes");
      }
      return FiError(err.err != 0 ? err.err : FI_EIO, what);
    }
    if (n != -FI_EAGAIN && n != -FI_ETIMEDOUT && n != 0) {
      broken_ = true;
      return FiError(n, "fi_cq_sread");
    }
    CLF_RETURN_IF_ERROR(CheckEvents());
    if (stop_ != nullptr && stop_->load()) return Status(Code::kCancelled, "rdma: stopping");
    if (Clock::now() >= deadline) {
      broken_ = true;
      return Status(Code::kTimedOut, "rdma: peer did not answer in time");
    }
  }
}

Status Endpoint::PostRecv() {
  if (recv_posted_) return Status::Ok();
  recv_done_ = false;
  CLF_RETURN_IF_ERROR(Posted(
      [&] {
        return fi_recv(ep_.get(), recv_buf_.data(), recv_buf_.size(), recv_mr_->desc, 0,
                       &recv_ctx_);
      },
      "fi_recv"));
  recv_posted_ = true;
  return Status::Ok();
}

Status Endpoint::Send(size_t len, Clock::time_point deadline) {
  send_done_ = false;
  CLF_RETURN_IF_ERROR(Posted(
      [&] { return fi_send(ep_.get(), send_buf_.data(), len, send_mr_->desc, 0, &send_ctx_); },
      "fi_send"));
  while (!send_done_) CLF_RETURN_IF_ERROR(Pump(deadline));
  return Status::Ok();
}

Result<size_t> Endpoint::WaitRecv(Clock::time_point deadline) {
  while (!recv_done_) CLF_RETURN_IF_ERROR(Pump(deadline));
  return recv_len_;
}

Status Endpoint::Rma(bool write, uint8_t* local, void* local_desc,
                     const std::vector<RemoteBuf>& remote, Clock::time_point deadline) {
  // The remote pieces, cut to the provider's largest operation.
  std::vector<fi_rma_iov> pieces;
  pieces.reserve(remote.size());
  for (const RemoteBuf& b : remote) {
    for (uint64_t done = 0; done < b.len;) {
      const uint64_t n = std::min<uint64_t>(b.len - done, max_op_bytes_);
      pieces.push_back(fi_rma_iov{b.addr + done, n, b.key});
      done += n;
    }
  }
  size_t i = 0;
  uint64_t off = 0;
  while (i < pieces.size() || rma_outstanding_ > 0) {
    if (i < pieces.size() && !free_slots_.empty()) {
      size_t k = 0;
      uint64_t bytes = 0;
      while (i + k < pieces.size() && k < rma_iov_limit_ &&
             bytes + pieces[i + k].len <= max_op_bytes_) {
        bytes += pieces[i + k].len;
        ++k;
      }
      const size_t slot = free_slots_.back();
      iovec liov{local + off, bytes};
      void* desc = local_desc;
      fi_msg_rma msg{};
      msg.msg_iov = &liov;
      msg.desc = &desc;
      msg.iov_count = 1;
      msg.rma_iov = &pieces[i];
      msg.rma_iov_count = k;
      msg.context = &rma_ctx_[slot];
      ssize_t rc = write ? fi_writemsg(ep_.get(), &msg, 0) : fi_readmsg(ep_.get(), &msg, 0);
      if (rc == -FI_EAGAIN) {
        if (rma_outstanding_ == 0) {
          if (Clock::now() >= deadline) {
            broken_ = true;
            return Status(Code::kTimedOut, "rdma: the provider's queue stayed full");
          }
          ::usleep(10);
        } else {
          CLF_RETURN_IF_ERROR(Pump(deadline));
        }
        continue;
      }
      if (rc != 0) {
        broken_ = true;
        return FiError(rc, write ? "fi_writemsg" : "fi_readmsg");
      }
      free_slots_.pop_back();
      ++rma_outstanding_;
      i += k;
      off += bytes;
      continue;
    }
    CLF_RETURN_IF_ERROR(Pump(deadline));
  }
  return Status::Ok();
}

}  // namespace clf::transport::rdma
