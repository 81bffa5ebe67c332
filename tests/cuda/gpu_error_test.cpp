// The text of GPU library failures and of a machine without a GPU.
#include <catch2/catch.hpp>

#include "executor/cuda/host/gpu_error.hpp"

using namespace pw;

TEST_CASE("a failed library call names file:line, the call and the library's message", "[cuda][host]") {
  CHECK(gpu_failure_text("cuBLAS", "cublasLtMatmul(handle, desc, ...)", "/work/main/executor/cuda/gemm.cpp", 42,
                         "CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported") ==
        "executor/cuda/gemm.cpp:42: cuBLAS call cublasLtMatmul(handle, desc, ...) failed: CUBLAS_STATUS_NOT_SUPPORTED "
        "(the functionality requested is not supported)");
  CHECK(gpu_failure_text("NCCL", "ncclSend(buf, n, ncclChar, 1, comm, stream)", "/x/profiler/cuda/links.cpp", 7,
                         "ncclRemoteError", "remote process exited or there was a network error",
                         "NET/IB : Got completion with error") ==
        "profiler/cuda/links.cpp:7: NCCL call ncclSend(buf, n, ncclChar, 1, comm, stream) failed: ncclRemoteError "
        "(remote process exited or there was a network error); NET/IB : Got completion with error");
}

TEST_CASE("source paths are cut to the repository's folders", "[cuda][host]") {
  CHECK(repository_path("/home/u/pipewright/executor/cuda/kernels.cu") == "executor/cuda/kernels.cu");
  CHECK(repository_path("executor/cuda/kernels.cu") == "executor/cuda/kernels.cu");
  // The first top-level folder counts, not a later one of the same name.
  CHECK(repository_path("/src/executor/cuda/profiler/x.cpp") == "executor/cuda/profiler/x.cpp");
  // "my_executor/" is not the folder "executor/".
  CHECK(repository_path("/a/my_executor/b.cpp") == "/a/my_executor/b.cpp");
}

TEST_CASE("cudaGetDeviceCount failing or finding nothing means no GPU", "[cuda][host]") {
  GpuProbe no_driver;
  no_driver.failed = true;
  no_driver.error = "CUDA driver version is insufficient for CUDA runtime version";
  CHECK_FALSE(gpu_present(no_driver));
  CHECK(no_gpu_text(no_driver) ==
        "no CUDA GPU here: cudaGetDeviceCount failed: CUDA driver version is insufficient for CUDA runtime version");

  GpuProbe none;
  CHECK_FALSE(gpu_present(none));
  CHECK(no_gpu_text(none) == "no CUDA GPU here: cudaGetDeviceCount found 0 devices");

  GpuProbe two;
  two.count = 2;
  CHECK(gpu_present(two));
}
