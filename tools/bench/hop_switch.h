// HopSwitch: a userspace Ethernet switch that holds every frame a fixed time D
// before forwarding it, for network-namespace testbeds on kernels without
// netem (tools/bench/netns_testbed.h). It stands where the kernel bridge would:
// one AF_PACKET socket per port (the bridge-side veth end of each node), source
// MACs learned, every frame sent to the port of its destination MAC (broadcast,
// multicast and unknown destinations flooded) D after it reached the switch. A
// node-to-node hop thus costs one-way D (a round trip 2D) on top of the links'
// tc shaping, which applies as before: the node's own TBF before the switch, the
// port's TBF after it.
//
// The frame's arrival time is the kernel's receive timestamp, so time a frame
// waited in the socket for the switch thread to run counts towards D. Each
// output port is a FIFO: a frame never overtakes one queued before it on the
// same port (its due time is at least its predecessor's). Sockets carry a
// virtio_net_hdr (PACKET_VNET_HDR): veth hands over 64 KiB GSO frames with
// partial checksums, and they are forwarded as such, not dropped or corrupted.
// Odd frames (short, truncated, refused by the port) are dropped and counted;
// queued bytes are capped (kMaxQueuedBytes), frames beyond the cap dropped.
//
// The switch runs on a thread of the calling process that has entered the
// switch's network namespace (setns), so it cannot outlive the process (not even
// one killed with SIGKILL) and holds no PID to track; the rest of the process
// stays in its own namespace. The thread asks for SCHED_FIFO (a switch does not
// wait for a CPU behind the nodes' processes; it sleeps between frames), else
// nice -20; timer slack 1 ns. The destructor (or Stop) ends the thread and
// closes the sockets; do that before deleting the namespace, which the sockets
// and the thread keep alive.
//
// Thread safety: AddPort, stats and Stop may be called from any thread, and
// concurrently. The switch thread blocks every signal, so a process's signal
// handlers keep running on its other threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace clf::tools {

class HopSwitch {
 public:
  // Frames queued in the switch, all ports together, at most this many bytes.
  static constexpr size_t kMaxQueuedBytes = size_t{64} << 20;

  struct Stats {
    uint64_t frames_in = 0;     // frames read from the ports
    uint64_t frames_out = 0;    // frames sent (a flooded frame counts once per port)
    uint64_t flooded = 0;       // frames flooded (broadcast, multicast, unknown destination)
    uint64_t dropped = 0;       // malformed, truncated, over the cap or refused by the port's qdisc
    uint64_t kernel_drops = 0;  // dropped by the kernel before the switch read them (a full
                                // socket buffer); counted when the sockets close (Stop)
    double mean_late_us = 0;    // how much later than due frames were sent, on average
    double max_late_us = 0;
    bool realtime = false;  // the switch thread got SCHED_FIFO (else nice -20)
  };

  // Starts the switch thread in network namespace `netns` (a name `ip netns`
  // knows, i.e. /var/run/netns/`netns`), holding frames `delay_us` µs.
  static Result<std::unique_ptr<HopSwitch>> Start(const std::string& netns, uint32_t delay_us);

  ~HopSwitch() { Stop(); }
  HopSwitch(const HopSwitch&) = delete;
  HopSwitch& operator=(const HopSwitch&) = delete;

  // Adds interface `ifname` of the switch's namespace (already up) as a port;
  // returns once its socket is open and forwarding.
  Status AddPort(const std::string& ifname);

  // Counters so far (kernel_drops only after Stop).
  Stats stats() const;

  // Ends the thread and closes every socket; frames still queued are dropped.
  // Idempotent.
  void Stop();

  uint32_t delay_us() const { return delay_us_; }

 private:
  struct Frame {
    int64_t due_ns = 0;          // CLOCK_MONOTONIC
    uint16_t proto_be = 0;       // the EtherType, network order
    std::vector<uint8_t> bytes;  // virtio_net_hdr, then the Ethernet frame
  };
  struct Port {
    std::string name;
    int ifindex = 0;
    int fd = -1;
    bool blocked = false;  // its socket's send buffer is full: waiting for EPOLLOUT
    bool dead = false;     // the interface went away
    int64_t last_due_ns = 0;
    std::deque<Frame> queue;
  };
  struct Command {
    std::string ifname;
    std::promise<Status> done;
  };

  explicit HopSwitch(uint32_t delay_us) : delay_us_(delay_us) {}

  // The switch thread.
  void Run(int netns_fd, std::promise<Status>* started);
  void Loop();
  Status OpenPort(const std::string& ifname);
  void RunCommands();
  void ReadPort(size_t index);
  void Forward(size_t in, const uint8_t* data, size_t len, int64_t arrival_ns);
  void Flush(int64_t now_ns);
  // The port's interface is gone: its queue is dropped, it is read no more.
  void MarkDead(size_t index);
  void ClosePorts();

  const uint32_t delay_us_;
  std::thread thread_;
  int wake_fd_ = -1;  // eventfd: commands or stop pending

  std::mutex stop_mu_;  // serializes Stop
  std::mutex mu_;       // guards wake_fd_ (its closing), commands_, stop_, running_
  std::deque<Command> commands_;
  bool stop_ = false;
  bool running_ = false;

  // Switch thread only.
  int epoll_fd_ = -1;
  std::vector<std::unique_ptr<Port>> ports_;
  std::unordered_map<uint64_t, size_t> macs_;  // learned source MAC -> port index
  size_t queued_bytes_ = 0;
  std::vector<uint8_t> rx_buf_;

  std::atomic<uint64_t> frames_in_{0}, frames_out_{0}, flooded_{0}, dropped_{0}, kernel_drops_{0};
  std::atomic<uint64_t> late_sum_ns_{0}, late_max_ns_{0};
  std::atomic<bool> realtime_{false};
};

}  // namespace clf::tools
