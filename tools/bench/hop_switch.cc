#include "tools/bench/hop_switch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>

namespace clf::tools {
namespace {

// struct virtio_net_hdr (flags, gso_type, hdr_len, gso_size, csum_start,
// csum_offset): <linux/virtio_net.h> does not compile as C++ (a member named class).
constexpr size_t kVnetLen = 10;
constexpr size_t kEthLen = 14;
// The largest frame read: veth's GSO frames are at most 64 KiB unless gso_max_size
// is raised; larger ones are dropped (counted).
constexpr size_t kRxBufBytes = kVnetLen + (size_t{256} << 10);
// Frames read from one port before the others (and due sends) get a turn.
constexpr int kRxBudget = 64;
constexpr int64_t kSecondNs = 1000000000;
// SCHED_FIFO priority of the switch thread: above every normal process, below
// the kernel's own RT threads (50 and up).
constexpr int kRealtimePriority = 10;

int64_t NowNs(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * kSecondNs + ts.tv_nsec;
}

uint64_t MacKey(const uint8_t* mac) {
  uint64_t k = 0;
  for (int i = 0; i < 6; ++i) k = (k << 8) | mac[i];
  return k;
}

// Wakes the reader of eventfd `fd`. A write fails only if the counter is full,
// and then the reader is awake anyway.
void Poke(int fd) {
  const uint64_t one = 1;
  const ssize_t r = write(fd, &one, sizeof one);
  (void)r;
}

// Broadcast and multicast addresses have the group bit set.
bool IsGroup(const uint8_t* mac) { return (mac[0] & 1) != 0; }

}  // namespace

Result<std::unique_ptr<HopSwitch>> HopSwitch::Start(const std::string& netns, uint32_t delay_us) {
  const std::string path = "/var/run/netns/" + netns;
  const int ns_fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns_fd < 0) return FromErrno(errno, "open " + path);
  std::unique_ptr<HopSwitch> s(new HopSwitch(delay_us));
  s->wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->wake_fd_ < 0) {
    const int e = errno;
    close(ns_fd);
    return FromErrno(e, "eventfd");
  }
  s->running_ = true;
  std::promise<Status> started;
  std::future<Status> result = started.get_future();
  s->thread_ = std::thread(&HopSwitch::Run, s.get(), ns_fd, &started);
  Status st = result.get();
  if (!st.ok()) return st.WithContext("hop switch in " + netns);  // ~HopSwitch joins
  return s;
}

Status HopSwitch::AddPort(const std::string& ifname) {
  std::future<Status> done;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!running_ || stop_) return Unavailable("hop switch is not running");
    commands_.push_back(Command{ifname, {}});
    done = commands_.back().done.get_future();
    Poke(wake_fd_);
  }
  return done.get();
}

HopSwitch::Stats HopSwitch::stats() const {
  Stats s;
  s.frames_in = frames_in_.load(std::memory_order_relaxed);
  s.frames_out = frames_out_.load(std::memory_order_relaxed);
  s.flooded = flooded_.load(std::memory_order_relaxed);
  s.dropped = dropped_.load(std::memory_order_relaxed);
  s.kernel_drops = kernel_drops_.load(std::memory_order_relaxed);
  const double late = double(late_sum_ns_.load(std::memory_order_relaxed));
  s.mean_late_us = s.frames_out > 0 ? late / double(s.frames_out) / 1e3 : 0;
  s.max_late_us = double(late_max_ns_.load(std::memory_order_relaxed)) / 1e3;
  s.realtime = realtime_.load(std::memory_order_relaxed);
  return s;
}

void HopSwitch::Stop() {
  std::lock_guard<std::mutex> stopping(stop_mu_);
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    if (wake_fd_ >= 0) Poke(wake_fd_);
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> l(mu_);
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
}

// ------------------------------------------------------------------ switch thread

void HopSwitch::Run(int netns_fd, std::promise<Status>* started) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  pthread_setname_np(pthread_self(), "clf-hopswitch");
  // Timers of this thread fire on time, not up to the default 50 µs slack late.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  // A switch is hardware of its own: when a frame is due, the thread runs at
  // once instead of waiting behind the nodes' processes for a CPU (on a busy
  // machine, hundreds of µs). It sleeps between frames; the kernel's RT
  // throttling still leaves others 5% of each CPU if it ever did not.
  sched_param sp{};
  sp.sched_priority = kRealtimePriority;
  if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0) {
    realtime_.store(true, std::memory_order_relaxed);
  } else {
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), -20);  // the next best
  }
  Status st = Status::Ok();
  if (setns(netns_fd, CLONE_NEWNET) != 0) st = FromErrno(errno, "setns");
  close(netns_fd);
  if (st.ok()) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = 0;  // ports are 1..n
    if (epoll_fd_ < 0 || epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
      st = FromErrno(errno, "epoll");
    }
  }
  const bool ok = st.ok();
  started->set_value(std::move(st));  // `started` is gone after this
  if (ok) {
    try {
      rx_buf_.resize(kRxBufBytes);
      Loop();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "hop switch: stopped: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "hop switch: stopped by an unknown exception\n");
    }
  }
  ClosePorts();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  epoll_fd_ = -1;
  std::deque<Command> pending;
  {
    std::lock_guard<std::mutex> l(mu_);
    running_ = false;
    pending.swap(commands_);
  }
  for (Command& c : pending) c.done.set_value(Unavailable("hop switch stopped"));
}

void HopSwitch::Loop() {
  epoll_event events[64];
  bool have_pwait2 = true;
  for (;;) {
    Flush(NowNs(CLOCK_MONOTONIC));
    int64_t next = std::numeric_limits<int64_t>::max();
    for (const auto& p : ports_) {
      if (!p->dead && !p->blocked && !p->queue.empty())
        next = std::min(next, p->queue.front().due_ns);
    }
    int n;
    if (next == std::numeric_limits<int64_t>::max()) {
      n = epoll_wait(epoll_fd_, events, 64, -1);
    } else {
      const int64_t wait = std::max<int64_t>(0, next - NowNs(CLOCK_MONOTONIC));
      if (have_pwait2) {
        const timespec ts{static_cast<time_t>(wait / kSecondNs),
                          static_cast<long>(wait % kSecondNs)};
        n = epoll_pwait2(epoll_fd_, events, 64, &ts, nullptr);
        if (n < 0 && errno == ENOSYS) {
          have_pwait2 = false;
          continue;
        }
      } else {
        n = epoll_wait(epoll_fd_, events, 64, static_cast<int>((wait + 999999) / 1000000));
      }
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "hop switch: epoll: %s\n", std::strerror(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == 0) {
        uint64_t v;
        const ssize_t r = read(wake_fd_, &v, sizeof v);  // resets the counter
        (void)r;
        {
          std::lock_guard<std::mutex> l(mu_);
          if (stop_) return;
        }
        RunCommands();
        continue;
      }
      const size_t index = static_cast<size_t>(tag - 1);
      Port& p = *ports_[index];
      if (p.dead) continue;
      if ((events[i].events & EPOLLOUT) != 0 && p.blocked) {
        p.blocked = false;
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = tag;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, p.fd, &ev);
      }
      if ((events[i].events & (EPOLLIN | EPOLLERR)) != 0) ReadPort(index);
    }
  }
}

void HopSwitch::RunCommands() {
  std::deque<Command> commands;
  {
    std::lock_guard<std::mutex> l(mu_);
    commands.swap(commands_);
  }
  for (Command& c : commands) c.done.set_value(OpenPort(c.ifname));
}

Status HopSwitch::OpenPort(const std::string& ifname) {
  const unsigned ifindex = if_nametoindex(ifname.c_str());
  if (ifindex == 0) return FromErrno(errno, "hop switch port " + ifname);
  // Protocol 0 until bound: an unbound ETH_P_ALL socket sees every interface's frames.
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return FromErrno(errno, "packet socket for " + ifname);
  auto fail = [&](const char* what) {
    const int e = errno;
    close(fd);
    return FromErrno(e, std::string(what) + " on hop switch port " + ifname);
  };
  const int one = 1;
  if (setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof one) != 0)
    return fail("PACKET_VNET_HDR");
  // Without it (kernels before 4.20) our own sends are skipped by their pkttype.
  setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
  if (setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) != 0)
    return fail("SO_TIMESTAMPNS");
  const int rcvbuf = 8 << 20;
  const int sndbuf = 4 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  }
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
  }
  packet_mreq mr{};
  mr.mr_ifindex = static_cast<int>(ifindex);
  mr.mr_type = PACKET_MR_PROMISC;
  if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) != 0)
    return fail("promisc");
  sockaddr_ll addr{};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = htons(ETH_P_ALL);
  addr.sll_ifindex = static_cast<int>(ifindex);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return fail("bind");
  auto port = std::make_unique<Port>();
  port->name = ifname;
  port->ifindex = static_cast<int>(ifindex);
  port->fd = fd;
  ports_.push_back(std::move(port));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = ports_.size();
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    const int e = errno;
    ports_.pop_back();
    close(fd);
    return FromErrno(e, "epoll on hop switch port " + ifname);
  }
  return Status::Ok();
}

void HopSwitch::ReadPort(size_t index) {
  Port& p = *ports_[index];
  // CLOCK_REALTIME (the kernel's receive stamps) minus CLOCK_MONOTONIC (due times).
  const int64_t mono = NowNs(CLOCK_MONOTONIC);
  const int64_t real_minus_mono = NowNs(CLOCK_REALTIME) - mono;
  for (int i = 0; i < kRxBudget && !p.dead; ++i) {
    iovec iov{rx_buf_.data(), rx_buf_.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec)) + 64];
    sockaddr_ll from{};
    msghdr msg{};
    msg.msg_name = &from;
    msg.msg_namelen = sizeof from;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(p.fd, &msg, MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR || errno == ENETDOWN) continue;  // ENETDOWN: reported once, then clear
      // A frame the kernel could not describe in a virtio_net_hdr (EINVAL) is consumed.
      dropped_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (from.sll_pkttype == PACKET_OUTGOING) continue;
    frames_in_.fetch_add(1, std::memory_order_relaxed);
    const size_t len = static_cast<size_t>(n);
    if ((msg.msg_flags & MSG_TRUNC) != 0 || len > rx_buf_.size() || len < kVnetLen + kEthLen) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    int64_t arrival = NowNs(CLOCK_MONOTONIC);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS ||
          c->cmsg_len < CMSG_LEN(sizeof(timespec))) {
        continue;
      }
      timespec ts;
      std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
      const int64_t stamped = int64_t{ts.tv_sec} * kSecondNs + ts.tv_nsec - real_minus_mono;
      // A step of the wall clock leaves the read time.
      if (stamped < arrival && stamped > arrival - kSecondNs) arrival = stamped;
    }
    Forward(index, rx_buf_.data(), len, arrival);
  }
}

void HopSwitch::Forward(size_t in, const uint8_t* data, size_t len, int64_t arrival_ns) {
  const uint8_t* dst = data + kVnetLen;
  const uint8_t* src = dst + 6;
  uint16_t proto_be;
  std::memcpy(&proto_be, dst + 12, sizeof proto_be);
  if (!IsGroup(src)) {
    if (macs_.size() >= 65536) macs_.clear();  // only a node spraying source addresses gets here
    macs_[MacKey(src)] = in;
  }
  bool flood = IsGroup(dst);
  size_t only = 0;
  if (!flood) {
    auto it = macs_.find(MacKey(dst));
    if (it == macs_.end()) {
      flood = true;
    } else {
      if (it->second == in) return;  // for the segment it came from: a bridge filters it too
      only = it->second;
    }
  }
  if (flood) flooded_.fetch_add(1, std::memory_order_relaxed);
  const int64_t due = arrival_ns + int64_t{delay_us_} * 1000;
  for (size_t k = 0; k < ports_.size(); ++k) {
    if (k == in || (!flood && k != only)) continue;
    Port& p = *ports_[k];
    if (p.dead) continue;
    if (queued_bytes_ + len > kMaxQueuedBytes) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    Frame f;
    f.due_ns = std::max(due, p.last_due_ns);  // FIFO per port
    f.proto_be = proto_be;
    f.bytes.assign(data, data + len);
    p.last_due_ns = f.due_ns;
    queued_bytes_ += len;
    p.queue.push_back(std::move(f));
  }
}

void HopSwitch::Flush(int64_t now_ns) {
  for (size_t k = 0; k < ports_.size(); ++k) {
    Port& p = *ports_[k];
    while (!p.dead && !p.blocked && !p.queue.empty() && p.queue.front().due_ns <= now_ns) {
      Frame& f = p.queue.front();
      sockaddr_ll to{};
      to.sll_family = AF_PACKET;
      to.sll_protocol = f.proto_be;
      to.sll_ifindex = p.ifindex;
      to.sll_halen = 6;
      std::memcpy(to.sll_addr, f.bytes.data() + kVnetLen, 6);
      const int64_t sent_at = NowNs(CLOCK_MONOTONIC);
      const ssize_t n = sendto(p.fd, f.bytes.data(), f.bytes.size(), MSG_DONTWAIT,
                               reinterpret_cast<const sockaddr*>(&to), sizeof to);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        // The socket's send buffer is full (frames held in the port's qdisc): wait.
        p.blocked = true;
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT;
        ev.data.u64 = k + 1;
        epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, p.fd, &ev);
        break;
      }
      if (n < 0 && (errno == ENXIO || errno == ENODEV)) {
        MarkDead(k);  // drops this frame with the rest of the queue
        break;
      }
      if (n < 0) {
        // ENOBUFS: the port's qdisc dropped it, as a full switch port would.
        dropped_.fetch_add(1, std::memory_order_relaxed);
      } else {
        frames_out_.fetch_add(1, std::memory_order_relaxed);
        const uint64_t late = static_cast<uint64_t>(std::max<int64_t>(0, sent_at - f.due_ns));
        late_sum_ns_.fetch_add(late, std::memory_order_relaxed);
        if (late > late_max_ns_.load(std::memory_order_relaxed)) {
          late_max_ns_.store(late, std::memory_order_relaxed);
        }
      }
      queued_bytes_ -= f.bytes.size();
      p.queue.pop_front();
    }
  }
}

void HopSwitch::MarkDead(size_t index) {
  Port& p = *ports_[index];
  p.dead = true;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, p.fd, nullptr);
  dropped_.fetch_add(p.queue.size(), std::memory_order_relaxed);
  for (const Frame& f : p.queue) queued_bytes_ -= f.bytes.size();
  p.queue.clear();
}

void HopSwitch::ClosePorts() {
  for (auto& p : ports_) {
    tpacket_stats st{};
    socklen_t sl = sizeof st;
    if (getsockopt(p->fd, SOL_PACKET, PACKET_STATISTICS, &st, &sl) == 0) {
      kernel_drops_.fetch_add(st.tp_drops, std::memory_order_relaxed);
    }
    close(p->fd);
    p->fd = -1;
  }
  ports_.clear();
  macs_.clear();
  queued_bytes_ = 0;
}

}  // namespace clf::tools
