#include "executor/cuda/cuda_check.hpp"

#include "core/error.hpp"
#include "executor/cuda/cublas_library.hpp"
#include "executor/cuda/host/gpu_error.hpp"

namespace pw::cuda {

void fail_cuda(cudaError_t status, const char* call, const char* file, int line) {
  throw Error(ErrorKind::Runtime,
              gpu_failure_text("CUDA", call, file, line, cudaGetErrorName(status), cudaGetErrorString(status)));
}

void fail_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  const CublasLibrary& lib = cublas();
  throw Error(ErrorKind::Runtime, gpu_failure_text("cuBLAS", call, file, line, lib.cublasGetStatusName(status),
                                                   lib.cublasGetStatusString(status)));
}

const char* nccl_result_name(ncclResult_t status) {
  switch (status) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult";
  }
}

void fail_nccl(ncclResult_t status, ncclComm_t comm, const char* call, const char* file, int line) {
  const char* last = ncclGetLastError(comm);
  throw Error(ErrorKind::Runtime, gpu_failure_text("NCCL", call, file, line, nccl_result_name(status),
                                                   ncclGetErrorString(status), last ? last : ""));
}

}  // namespace pw::cuda
