#pragma once
// Row-major GEMMs on cuBLASLt with fp32 accumulation: D (m x n) = alpha op(A) op(B) + beta D, optionally
// strided-batched. Inputs bf16 or fp32, output the inputs' type or fp32. A plan (descriptors and the
// heuristic's algorithm) is made once per shape and kept: the layers repeat the same shapes every micro-batch.
// Where cuBLASLt offers no algorithm (odd leading dimensions in bf16), cublasGemmStridedBatchedEx runs it.
#include <map>
#include <memory>
#include <tuple>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "executor/cuda/host/dtype.hpp"

namespace pw::cuda {

class DeviceAllocator;
class DeviceBlock;

struct GemmOperand {
  const void* data = nullptr;
  int ld = 0;              // row-major leading dimension: the stored matrix's column count
  bool transpose = false;  // op(X) = X^T
  long long stride = 0;    // elements between the matrices of a batch
};

class Gemm {
 public:
  // Per rank (a cuBLASLt handle is not shared between threads); GEMMs run on `stream`.
  Gemm(cudaStream_t stream, DeviceAllocator& allocator);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // `in` is the type of A and B, `out` that of D. D's leading dimension is ldd, its batch stride d_stride.
  void run(DType in, DType out, int m, int n, int k, const GemmOperand& a, const GemmOperand& b, void* d, int ldd,
           long long d_stride, float alpha, float beta, int batch = 1);

  cudaStream_t stream() const { return stream_; }

 private:
  struct Plan;
  using Key = std::tuple<int, int, int, int, int, int, int, int, int, int, long long, long long, long long, int>;
  Plan& plan_for(const Key& key, DType in, DType out, int m, int n, int k, const GemmOperand& a, const GemmOperand& b,
                 int ldd, long long d_stride, int batch);

  cudaStream_t stream_;
  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::shared_ptr<DeviceBlock> workspace_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace pw::cuda
