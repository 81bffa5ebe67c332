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
  // A tag, the rows and the columns, then the floats as they lie in memory (both ends run the same build,
  // so byte order and float format agree).
  void append_wire(std::vector<std::byte>& out) const override;

  Mat value;
};

// The HostTensor `wire` holds; null when it does not start with a host tensor's tag. Runtime error when the
// tag is there but the sizes disagree with the length.
TensorPtr host_tensor_from_wire(std::span<const std::byte> wire);

}  // namespace pw
