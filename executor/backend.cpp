#include "executor/backend.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "executor/host_tensor.hpp"

namespace pw {

void MemoryTracker::add(double delta) {
  current_ += delta;
  peak_ = std::max(peak_, current_);
  iteration_peak_ = std::max(iteration_peak_, current_);
  samples_.push_back({std::chrono::duration<double>(Clock::now() - origin_).count(), current_});
}

void MemoryTracker::begin_iteration(Clock::time_point origin) {
  origin_ = origin;
  iteration_peak_ = current_;
  samples_.clear();
  samples_.push_back({0.0, current_});
}

void Tensor::append_wire(std::vector<std::byte>&) const {
  throw_runtime("this backend's tensors cannot be sent to another process; run the ranks as threads");
}

TensorPtr Backend::tensor_from_wire(std::span<const std::byte> wire) const {
  if (TensorPtr t = host_tensor_from_wire(wire)) return t;
  throw_runtime("a tensor of {} bytes arrived in a form the {} backend cannot read", wire.size(), name());
}

TensorPtr RankCompute::backward(int stage, int mb, TensorPtr grad_output) {
  TensorPtr g = backward_input(stage, mb, std::move(grad_output));
  backward_weight(stage, mb);
  return g;
}

RankCompute::FbResult RankCompute::forward_backward(const Action& fb, TensorPtr input, TensorPtr grad_output) {
  FbResult r;
  r.output = forward(fb.stage, fb.microbatch, std::move(input));
  r.input_grad = backward(fb.stage2, fb.microbatch2, std::move(grad_output));
  return r;
}

}  // namespace pw
