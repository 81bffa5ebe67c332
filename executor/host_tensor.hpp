#pragma once
// A tensor in host memory: the CPU backend's activations and gradients, the sleep backend's stand-ins.
#include <memory>

#include "executor/backend.hpp"
#include "executor/cpu_tensor.hpp"

namespace pw {

class HostTensor : public Tensor {
 public:
  explicit HostTensor(Mat value) : value(std::move(value)) {}
  double bytes() const override { return bytes_of(value); }
  TensorPtr clone() const override { return std::make_shared<HostTensor>(value); }

  Mat value;
};

}  // namespace pw
