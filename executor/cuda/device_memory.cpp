#include "executor/cuda/device_memory.hpp"

#include "executor/cuda/cuda_check.hpp"

namespace pw::cuda {

DeviceGuard::DeviceGuard(int device) {
  PW_CUDA(cudaGetDevice(&previous_));
  if (previous_ != device) PW_CUDA(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() { cudaSetDevice(previous_); }

DeviceAllocator::DeviceAllocator(int device)
    : device_(device),
      pool_(
          [device](std::size_t bytes) -> void* {
            DeviceGuard on(device);
            void* p = nullptr;
            const cudaError_t e = cudaMalloc(&p, bytes);
            if (e == cudaErrorMemoryAllocation) {
              cudaGetLastError();  // clear it: the pool frees its cache and tries again, or reports
              return nullptr;
            }
            PW_CUDA(e);
            return p;
          },
          [device](void* p) {
            // Blocks go back at teardown too, where an error has nowhere to go; the failure that caused a
            // teardown has been reported already.
            int previous = 0;
            if (cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(device) == cudaSuccess) {
              (void)cudaFree(p);
              (void)cudaSetDevice(previous);
            }
          }) {}

void* DeviceAllocator::allocate(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  return pool_.allocate(bytes);
}

void DeviceAllocator::release(void* block) {
  std::lock_guard lock(mutex_);
  pool_.release(block);
}

std::size_t DeviceAllocator::in_use() const {
  std::lock_guard lock(mutex_);
  return pool_.in_use();
}

std::size_t DeviceAllocator::peak() const {
  std::lock_guard lock(mutex_);
  return pool_.peak();
}

std::size_t DeviceAllocator::reserved() const {
  std::lock_guard lock(mutex_);
  return pool_.reserved();
}

void DeviceAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  pool_.reset_peak();
}

DeviceBlock::DeviceBlock(DeviceAllocator& allocator, std::size_t bytes)
    : allocator_(&allocator), data_(allocator.allocate(bytes)), bytes_(bytes) {}

DeviceBlock::~DeviceBlock() { allocator_->release(data_); }

BlockPtr allocate_block(DeviceAllocator& allocator, std::size_t bytes) {
  return std::make_shared<DeviceBlock>(allocator, bytes);
}

DeviceTensor::DeviceTensor(DeviceAllocator& allocator, DType dtype, long rows, long cols)
    : dtype_(dtype),
      rows_(rows),
      cols_(cols),
      block_(allocate_block(allocator, static_cast<std::size_t>(rows * cols) * dtype_bytes(dtype))) {}

DeviceTensor::DeviceTensor(BlockPtr block, DType dtype, long rows, long cols)
    : dtype_(dtype), rows_(rows), cols_(cols), block_(std::move(block)) {}

TensorPtr DeviceTensor::clone() const {
  auto copy = std::make_shared<DeviceTensor>(allocator(), dtype_, rows_, cols_);
  DeviceGuard on(device());
  PW_CUDA(cudaMemcpy(copy->data(), data(), static_cast<std::size_t>(bytes()), cudaMemcpyDeviceToDevice));
  // A device-to-device cudaMemcpy may return before the copy is done.
  PW_CUDA(cudaStreamSynchronize(cudaStreamLegacy));
  return copy;
}

}  // namespace pw::cuda
