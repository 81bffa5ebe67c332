#include "executor/sleep_backend.hpp"

#include <cmath>
#include <thread>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "core/error.hpp"
#include "executor/host_tensor.hpp"

namespace pw {

void sleep_until(Clock::time_point deadline, const std::atomic<bool>* stop) {
#if defined(__linux__)
  // Linux lets a sleeping thread oversleep by its timer slack (50 us by default) to batch wake-ups; at
  // sub-millisecond predicted durations that would be a visible error.
  thread_local const bool slack_set = prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) == 0;
  (void)slack_set;
#endif
  constexpr auto kSlice = std::chrono::milliseconds(5);
  // A virtual machine wakes a sleeping thread tens of microseconds late whatever the slack; the last part
  // of the wait yields in a loop instead, so that an action lasts its predicted time to a few microseconds.
  constexpr auto kSpin = std::chrono::microseconds(150);
  for (;;) {
    if (stop && *stop) throw RunAborted();
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return;
    if (deadline - now <= kSpin) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_until(std::min(deadline - kSpin, now + kSlice));
  }
}

namespace {

Clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// A zero-filled stand-in of the boundary tensor's size (whole floats).
TensorPtr stand_in(double bytes) {
  const auto floats = static_cast<Eigen::Index>(std::ceil(bytes / 4.0));
  return std::make_shared<HostTensor>(Mat::Zero(1, floats));
}

class SleepRank : public RankCompute {
 public:
  SleepRank(const std::vector<StageCost>& stages, const RankSetup& setup) : stages_(stages), setup_(setup) {}

  TensorPtr forward(int stage, int, TensorPtr) override {
    const StageCost& c = stages_[static_cast<size_t>(stage)];
    wait(c.forward_s);
    setup_.memory->add(c.activation_bytes);
    return stage + 1 < setup_.num_stages ? stand_in(c.output_bytes) : nullptr;
  }

  TensorPtr backward_input(int stage, int, TensorPtr) override {
    const StageCost& c = stages_[static_cast<size_t>(stage)];
    wait(c.backward_input_s);
    setup_.memory->add(-(c.activation_bytes - c.weight_grad_bytes));
    return gradient(stage);
  }

  void backward_weight(int stage, int) override {
    const StageCost& c = stages_[static_cast<size_t>(stage)];
    wait(c.backward_weight_s);
    setup_.memory->add(-c.weight_grad_bytes);
  }

  TensorPtr backward(int stage, int, TensorPtr) override {
    const StageCost& c = stages_[static_cast<size_t>(stage)];
    wait(c.full_backward_s());
    setup_.memory->add(-c.activation_bytes);
    return gradient(stage);
  }

  void optimizer_step() override {
    double total = 0;
    for (int s : setup_.stages) total += stages_[static_cast<size_t>(s)].optimizer_s;
    wait(total);
  }

 private:
  // The gradient of a stage's input has the shape of the previous stage's output.
  TensorPtr gradient(int stage) const {
    return stage > 0 ? stand_in(stages_[static_cast<size_t>(stage - 1)].output_bytes) : nullptr;
  }
  void wait(double seconds) const { sleep_until(Clock::now() + to_duration(seconds), setup_.stop); }

  const std::vector<StageCost>& stages_;
  RankSetup setup_;
};

}  // namespace

SleepBackend::SleepBackend(std::vector<StageCost> stages) : stages_(std::move(stages)) {}

std::unique_ptr<RankCompute> SleepBackend::make_rank(const RankSetup& setup) {
  if (setup.num_stages != static_cast<int>(stages_.size()))
    throw_bad_input("stage costs: {} given for a schedule of {} stages; give one per stage", stages_.size(),
                    setup.num_stages);
  return std::make_unique<SleepRank>(stages_, setup);
}

}  // namespace pw
