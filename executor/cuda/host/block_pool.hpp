#pragma once
// Device memory as the CUDA backend hands it out: blocks rounded to a granularity and cached by size after
// release (a training step frees and allocates the same sizes again and again; cudaMalloc and cudaFree
// synchronise the device). It keeps the accounting the profiler and the executor read: bytes in use, their
// high-water mark, bytes reserved from the driver. The raw allocator is injected, so the accounting is
// tested on the host.
#include <cstddef>
#include <functional>
#include <map>
#include <unordered_map>
#include <vector>

namespace pw {

class BlockPool {
 public:
  // `raw_alloc` returns null when the device is out of memory; `raw_free` returns the block to the driver.
  using RawAlloc = std::function<void*(std::size_t)>;
  using RawFree = std::function<void(void*)>;
  BlockPool(RawAlloc raw_alloc, RawFree raw_free);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Multiples of 512 bytes (cuBLASLt and vector loads want 256-byte alignment; cudaMalloc gives it).
  static std::size_t rounded(std::size_t bytes);

  // A block of at least `bytes` (a cached one of the same rounded size when there is one). When the raw
  // allocator fails, the cache goes back to the driver and the allocation is tried once more; Runtime
  // error "out of device memory: ..." naming the request, the bytes in use and reserved after that.
  // Zero bytes gives null.
  void* allocate(std::size_t bytes);
  // Back to the cache; null is ignored; Runtime error for a pointer this pool did not hand out.
  void release(void* block);
  // Cached blocks back to the driver.
  void trim();

  std::size_t in_use() const { return in_use_; }
  std::size_t peak() const { return peak_; }  // high-water mark of in_use since construction or reset_peak
  std::size_t reserved() const { return reserved_; }  // in use + cached
  std::size_t cached() const { return reserved_ - in_use_; }
  long raw_allocations() const { return raw_allocations_; }
  void reset_peak() { peak_ = in_use_; }

 private:
  RawAlloc raw_alloc_;
  RawFree raw_free_;
  std::unordered_map<void*, std::size_t> live_;         // block -> rounded size
  std::map<std::size_t, std::vector<void*>> free_;      // rounded size -> cached blocks
  std::size_t in_use_ = 0;
  std::size_t peak_ = 0;
  std::size_t reserved_ = 0;
  long raw_allocations_ = 0;
};

}  // namespace pw
