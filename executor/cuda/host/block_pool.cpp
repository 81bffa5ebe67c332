#include "executor/cuda/host/block_pool.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/units.hpp"

namespace pw {

BlockPool::BlockPool(RawAlloc raw_alloc, RawFree raw_free) : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}

BlockPool::~BlockPool() {
  trim();
  // Blocks still live at the end belong to tensors that outlived their backend; give them back too.
  for (auto& [block, size] : live_) raw_free_(block);
}

std::size_t BlockPool::rounded(std::size_t bytes) {
  constexpr std::size_t kGranule = 512;
  return (bytes + kGranule - 1) / kGranule * kGranule;
}

void* BlockPool::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const std::size_t size = rounded(bytes);
  void* block = nullptr;
  auto cached = free_.find(size);
  if (cached != free_.end() && !cached->second.empty()) {
    block = cached->second.back();
    cached->second.pop_back();
  } else {
    block = raw_alloc_(size);
    if (!block) {
      trim();
      block = raw_alloc_(size);
    }
    if (!block)
      throw_runtime("out of device memory: {} requested with {} in use and {} reserved", format_bytes(static_cast<double>(size)),
                    format_bytes(static_cast<double>(in_use_)), format_bytes(static_cast<double>(reserved_)));
    ++raw_allocations_;
    reserved_ += size;
  }
  live_[block] = size;
  in_use_ += size;
  peak_ = std::max(peak_, in_use_);
  return block;
}

void BlockPool::release(void* block) {
  if (!block) return;
  auto it = live_.find(block);
  if (it == live_.end()) throw_runtime("device memory: released a block this pool did not allocate");
  in_use_ -= it->second;
  free_[it->second].push_back(block);
  live_.erase(it);
}

void BlockPool::trim() {
  for (auto& [size, blocks] : free_)
    for (void* b : blocks) {
      raw_free_(b);
      reserved_ -= size;
    }
  free_.clear();
}

}  // namespace pw
