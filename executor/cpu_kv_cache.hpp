#pragma once
// One pipeline stage's KV cache on the CPU backend: per (layer, request) the keys and values of every position
// computed so far, in float32, rows allocated once for the request's longest length.
#include <map>
#include <utility>

#include "executor/cpu_tensor.hpp"

namespace pw {

struct KvRows {
  Mat k, v;  // positions x (kv_heads x head_dim)
};

class CpuKvCache {
 public:
  // The rows of `layer` for `request`, made with room for `capacity` positions at first use.
  KvRows& at(int layer, long request, long capacity, Eigen::Index width);
  // A finished request's rows, on every layer.
  void drop(long request);
  double bytes() const { return bytes_; }
  double peak_bytes() const { return peak_bytes_; }

 private:
  std::map<std::pair<long, int>, KvRows> rows_;  // by (request, layer), so drop finds a request's together
  double bytes_ = 0, peak_bytes_ = 0;
};

}  // namespace pw
