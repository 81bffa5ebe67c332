#include "executor/cpu_kv_cache.hpp"

#include <algorithm>

namespace pw {

KvRows& CpuKvCache::at(int layer, long request, long capacity, Eigen::Index width) {
  auto [it, added] = rows_.try_emplace({request, layer});
  if (added) {
    it->second.k = Mat::Zero(capacity, width);
    it->second.v = Mat::Zero(capacity, width);
    bytes_ += bytes_of(it->second.k) + bytes_of(it->second.v);
    peak_bytes_ = std::max(peak_bytes_, bytes_);
  }
  return it->second;
}

void CpuKvCache::drop(long request) {
  auto it = rows_.lower_bound({request, 0});
  while (it != rows_.end() && it->first.first == request) {
    bytes_ -= bytes_of(it->second.k) + bytes_of(it->second.v);
    it = rows_.erase(it);
  }
}

}  // namespace pw
