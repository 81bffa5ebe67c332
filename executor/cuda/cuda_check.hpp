#pragma once
// Every CUDA, cuBLAS and NCCL call goes through one of these: a failure throws a Runtime error naming
// file:line, the call and the library's message (executor/cuda/host/gpu_error.hpp words it).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

namespace pw::cuda {

[[noreturn]] void fail_cuda(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void fail_cublas(cublasStatus_t status, const char* call, const char* file, int line);
[[noreturn]] void fail_nccl(ncclResult_t status, ncclComm_t comm, const char* call, const char* file, int line);
// NCCL's name of a result code ("ncclUnhandledCudaError", ...).
const char* nccl_result_name(ncclResult_t status);

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) fail_cuda(status, call, file, line);
}
inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) fail_cublas(status, call, file, line);
}
// ncclInProgress is a nonblocking communicator at work, not a failure: the caller polls it.
inline ncclResult_t check_nccl(ncclResult_t status, ncclComm_t comm, const char* call, const char* file, int line) {
  if (status != ncclSuccess && status != ncclInProgress) fail_nccl(status, comm, call, file, line);
  return status;
}

}  // namespace pw::cuda

#define PW_CUDA(call) ::pw::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define PW_CUBLAS(call) ::pw::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// `comm` (may be nullptr) adds NCCL's last error text for that communicator.
#define PW_NCCL(comm, call) ::pw::cuda::check_nccl((call), (comm), #call, __FILE__, __LINE__)
