#include "server/data/read_gate.h"

namespace clf::server {

class ReadGate::Turn final : public transport::DataHandler::ReadTurn {
 public:
  explicit Turn(ReadGate* gate) : gate_(gate) {}
  ~Turn() override { gate_->Leave(); }

 private:
  ReadGate* gate_;
};

ReadGate::ReadGate(ReadScheduleOptions o)
    : opts_(o), queue_(o.self, o.max_bypass, 0x5eed0000u + o.self) {}

std::unique_ptr<transport::DataHandler::ReadTurn> ReadGate::Await(Handle h, uint64_t offset,
                                                                  uint32_t sched_tag) {
  const uint32_t code = transport::SchedTagPolicy(sched_tag);
  if (opts_.slots == 0 || code == kSchedUnset || code > kMaxSchedCode) return nullptr;
  std::unique_lock<std::mutex> l(mu_);
  if (busy_ < opts_.slots && queue_.empty()) {
    ++busy_;
    ++immediate_;
    return std::make_unique<Turn>(this);
  }
  const uint64_t id = next_id_++;
  queue_.Add({id, transport::SchedTagRank(sched_tag), SchedFromCode(code), h, offset});
  ++waited_;
  cv_.wait(l, [&] { return admitted_.count(id) > 0; });
  admitted_.erase(id);  // busy_ was counted for us by Leave
  return std::make_unique<Turn>(this);
}

void ReadGate::Leave() {
  std::lock_guard<std::mutex> l(mu_);
  --busy_;
  bool woke = false;
  while (busy_ < opts_.slots && !queue_.empty()) {
    admitted_.insert(queue_.Pop().id);
    ++busy_;
    woke = true;
  }
  if (woke) cv_.notify_all();
}

uint64_t ReadGate::waited() const {
  std::lock_guard<std::mutex> l(mu_);
  return waited_;
}
uint64_t ReadGate::immediate() const {
  std::lock_guard<std::mutex> l(mu_);
  return immediate_;
}

}  // namespace clf::server
