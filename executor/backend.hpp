#pragma once
// What the runtime asks of a backend: the compute of one rank's stages (F, B, W, BW, FB of a stage for a
// micro-batch, the optimizer step) and the tensors it hands between stages. The runtime owns the schedule:
// a backend only computes what it is told, in the order it is told.
#include <atomic>
#include <chrono>
#include <exception>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "schedules/ir.hpp"

namespace pw {

// A tensor that crosses a stage boundary: a stage's output going forward or its input gradient going back.
class Tensor {
 public:
  virtual ~Tensor() = default;
  virtual double bytes() const = 0;
  // A copy the receiver owns (what a transport delivers).
  virtual std::shared_ptr<Tensor> clone() const = 0;
  // Appends the bytes a transport between processes carries; the receiving process's
  // Backend::tensor_from_wire rebuilds the tensor from them. Default: Runtime error (tensors that cannot
  // leave their process).
  virtual void append_wire(std::vector<std::byte>& out) const;
};
using TensorPtr = std::shared_ptr<Tensor>;

// Thrown inside a rank when another rank has stopped the run; the rank ends quietly.
struct RunAborted : std::exception {
  const char* what() const noexcept override { return "run aborted by another rank"; }
};

using Clock = std::chrono::steady_clock;

// Activation bytes a rank holds: every change is stamped with the time since the iteration began.
struct MemorySample {
  double time_s = 0;
  double bytes = 0;
};

class MemoryTracker {
 public:
  // Allocation (delta > 0) or release (delta < 0).
  void add(double delta);
  double current() const { return current_; }
  double peak() const { return peak_; }                      // over the whole run
  double iteration_peak() const { return iteration_peak_; }  // since begin_iteration
  // Starts a new iteration's samples and peak; bytes still held carry over.
  void begin_iteration(Clock::time_point origin);
  const std::vector<MemorySample>& samples() const { return samples_; }

 private:
  double current_ = 0;
  double peak_ = 0;
  double iteration_peak_ = 0;
  Clock::time_point origin_{};
  std::vector<MemorySample> samples_;
};

// Exchanges among the data-parallel replicas of one pipeline rank: what a backend's expert all-to-all and
// gradient reduction use. Members are named by their replica index; every replica of a pipeline rank makes
// the same calls in the same order (they run the same action list), which is what pairs their messages.
class Collectives {
 public:
  virtual ~Collectives() = default;
  // Sends parts[i] to replica group[i] and returns what each member sent here, in group order (this
  // replica's own part is handed back as it is). `group` holds this replica. Waits as a receive does.
  virtual std::vector<TensorPtr> all_to_all(const std::vector<int>& group, std::vector<TensorPtr> parts) = 0;
};

// The part of the run a rank's compute sees.
struct RankSetup {
  int rank = 0;
  std::vector<int> stages;  // the stages this rank holds, ascending
  int num_stages = 0;
  // Data parallelism: this rank belongs to replica `replica` of `replicas` copies of the pipeline, each
  // training on its own micro-batches.
  int replica = 0;
  int replicas = 1;
  Collectives* collectives = nullptr;  // among the replicas of this pipeline rank; set when replicas > 1
  MemoryTracker* memory = nullptr;
  const std::atomic<bool>* stop = nullptr;  // set when the run is stopping; long waits should end (RunAborted)
};

class RankCompute {
 public:
  virtual ~RankCompute() = default;
  virtual void begin_iteration(int iteration, int microbatches) {}
  virtual void end_iteration() {}
  // F of (stage, mb): `input` is the previous stage's output (null for stage 0). Returns the output for the
  // next stage (null for the last stage).
  virtual TensorPtr forward(int stage, int mb, TensorPtr input) = 0;
  // B of (stage, mb): `grad_output` is the gradient of the stage's output (null for the last stage).
  // Returns the gradient of its input (null for stage 0).
  virtual TensorPtr backward_input(int stage, int mb, TensorPtr grad_output) = 0;
  // W of (stage, mb): the weight gradients B left.
  virtual void backward_weight(int stage, int mb) = 0;
  // BW: B then W unless the backend has a fused kernel.
  virtual TensorPtr backward(int stage, int mb, TensorPtr grad_output);
  // The composite F of (fb.stage, fb.microbatch) with BW of (fb.stage2, fb.microbatch2): F then BW unless the
  // backend registers a fused kernel by overriding this. Returns {F's output, BW's input gradient}.
  struct FbResult {
    TensorPtr output;
    TensorPtr input_grad;
  };
  virtual FbResult forward_backward(const Action& fb, TensorPtr input, TensorPtr grad_output);
  virtual void optimizer_step() = 0;
};

// The losses of a run, one per iteration: the mean over the ranks that hold the head (one per data-parallel
// replica), each adding its own from its thread.
class LossLog {
 public:
  void add(int iteration, double loss) {
    std::lock_guard lock(mutex_);
    if (sums_.size() <= static_cast<size_t>(iteration)) {
      sums_.resize(static_cast<size_t>(iteration) + 1, 0.0);
      counts_.resize(sums_.size(), 0);
    }
    sums_[static_cast<size_t>(iteration)] += loss;
    ++counts_[static_cast<size_t>(iteration)];
  }
  std::vector<double> values() const {
    std::lock_guard lock(mutex_);
    std::vector<double> out;
    for (size_t i = 0; i < sums_.size() && counts_[i] > 0; ++i) out.push_back(sums_[i] / counts_[i]);
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<double> sums_;
  std::vector<int> counts_;
};

// A rank of a backend that computes the loss: where the iteration is, and the mean loss over its
// micro-batches when the rank holds the head, added to `log` at the iteration's end.
class LossRank : public RankCompute {
 public:
  explicit LossRank(LossLog& log) : log_(log) {}
  void begin_iteration(int iteration, int microbatches) override {
    iteration_ = iteration;
    m_ = microbatches;
    loss_ = 0;
    holds_head_ = false;
  }
  void end_iteration() override {
    if (holds_head_) log_.add(iteration_, loss_);
  }

 protected:
  // One micro-batch's loss, from the rank that computed the head.
  void add_loss(double microbatch_loss) {
    holds_head_ = true;
    loss_ += microbatch_loss / static_cast<double>(m_);
  }
  int iteration() const { return iteration_; }
  int microbatches() const { return m_; }

 private:
  LossLog& log_;
  int iteration_ = 0;
  int m_ = 1;
  double loss_ = 0;
  bool holds_head_ = false;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Called on the rank's own thread before its first action.
  virtual std::unique_ptr<RankCompute> make_rank(const RankSetup& setup) = 0;
  // Rebuilds a tensor another process's Tensor::append_wire wrote. The default reads host tensors (float32
  // matrices, executor/host_tensor.hpp: the cpu and sleep backends' tensors); a backend whose tensors live
  // elsewhere overrides it. Runtime error for bytes in a form it cannot read.
  virtual std::shared_ptr<Tensor> tensor_from_wire(std::span<const std::byte> wire) const;
};

}  // namespace pw
