#pragma once
// The text of a failed CUDA, cuBLAS or NCCL call and of a machine without a GPU. Plain C++ (no CUDA
// headers): the CUDA code passes the library's status name and message in, so the wording is tested here.
#include <string>
#include <string_view>

namespace pw {

// "executor/cuda/gemm.cpp:42: cuBLAS call cublasLtMatmul(...) failed: CUBLAS_STATUS_NOT_SUPPORTED (the
// functionality requested is not supported)". `file` is trimmed to the path inside the repository;
// `detail` (NCCL's last error, for one) is appended after "; " when not empty.
std::string gpu_failure_text(std::string_view library, std::string_view call, std::string_view file, int line,
                             std::string_view status, std::string_view message, std::string_view detail = {});

// A compiler's __FILE__ cut to the part from the first top-level folder of pipewright ("executor/...",
// "profiler/...", "tests/..."); the text unchanged when it has none of them.
std::string_view repository_path(std::string_view file);

// What cudaGetDeviceCount answered.
struct GpuProbe {
  int count = 0;
  bool failed = false;  // cudaGetDeviceCount returned an error (no driver, an old driver, no device)
  std::string error;    // its message when it failed
};

// Any failure of cudaGetDeviceCount, or a count of 0, means no usable GPU ("CUDA driver version is
// insufficient for CUDA runtime version" on a machine with the toolkit and no driver).
bool gpu_present(const GpuProbe& probe);
// One line: "no CUDA GPU here: cudaGetDeviceCount failed: <error>" or "no CUDA GPU here: cudaGetDeviceCount
// found 0 devices".
std::string no_gpu_text(const GpuProbe& probe);

// The one-line BadInput text of `--backend cuda` in a build without CUDA.
std::string cuda_not_built_text();

}  // namespace pw
