#pragma once
// Device memory of one rank: a BlockPool (executor/cuda/host/block_pool.hpp) over cudaMalloc on the rank's
// GPU, safe to release from any thread (a transport drops a tensor on the receiver's thread), and device
// tensors that return their block when the last holder lets go.
//
// Reuse is safe because each compute action of a rank ends with its stream synchronised (the backend's
// rule), and a transport keeps a tensor alive until the copy or NCCL operation that reads it completed.
#include <cstddef>
#include <memory>
#include <mutex>

#include <cuda_runtime.h>

#include "executor/backend.hpp"
#include "executor/cuda/host/block_pool.hpp"
#include "executor/cuda/host/dtype.hpp"

namespace pw::cuda {

class DeviceAllocator {
 public:
  explicit DeviceAllocator(int device);
  int device() const { return device_; }
  void* allocate(std::size_t bytes);
  void release(void* block);
  std::size_t in_use() const;
  std::size_t peak() const;
  std::size_t reserved() const;
  void reset_peak();

 private:
  int device_;
  mutable std::mutex mutex_;
  BlockPool pool_;
};

class DeviceBlock {
 public:
  DeviceBlock(DeviceAllocator& allocator, std::size_t bytes);
  ~DeviceBlock();
  DeviceBlock(const DeviceBlock&) = delete;
  DeviceBlock& operator=(const DeviceBlock&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  DeviceAllocator& allocator() const { return *allocator_; }

 private:
  DeviceAllocator* allocator_;
  void* data_;
  std::size_t bytes_;
};
using BlockPtr = std::shared_ptr<DeviceBlock>;
BlockPtr allocate_block(DeviceAllocator& allocator, std::size_t bytes);

// A rows x cols row-major matrix of `dtype` on a GPU: what crosses a stage boundary.
class DeviceTensor : public Tensor {
 public:
  DeviceTensor(DeviceAllocator& allocator, DType dtype, long rows, long cols);
  // Wraps a block a layer produced.
  DeviceTensor(BlockPtr block, DType dtype, long rows, long cols);
  double bytes() const override { return static_cast<double>(elements()) * dtype_bytes(dtype_); }
  // A copy in the same allocator, complete when clone() returns.
  TensorPtr clone() const override;

  void* data() const { return block_->data(); }
  const BlockPtr& block() const { return block_; }
  DType dtype() const { return dtype_; }
  long rows() const { return rows_; }
  long cols() const { return cols_; }
  long elements() const { return rows_ * cols_; }
  int device() const { return block_->allocator().device(); }
  DeviceAllocator& allocator() const { return block_->allocator(); }

 private:
  DType dtype_;
  long rows_, cols_;
  BlockPtr block_;
};

// Makes `device` current for the calling thread while in scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();

 private:
  int previous_ = 0;
};

}  // namespace pw::cuda
