#include "executor/cuda/host/cuda_api.hpp"

#include "core/error.hpp"

namespace pw {

DType dtype_from_text(const std::string& text) {
  if (text == "bf16") return DType::BF16;
  if (text == "fp32") return DType::F32;
  throw_bad_input("--dtype: must be bf16 or fp32, got '{}'", text);
}

const char* to_string(DType dtype) { return dtype == DType::BF16 ? "bf16" : "fp32"; }

int dtype_bytes(DType dtype) { return dtype == DType::BF16 ? 2 : 4; }

#ifdef PIPEWRIGHT_HAVE_CUDA
bool cuda_built() { return true; }
#else
// This build has no CUDA libraries: the entry points say so (the CUDA ones live in pipewright_cuda_executor).
bool cuda_built() { return false; }

GpuProbe probe_gpus() {
  GpuProbe p;
  p.failed = true;
  p.error = "this pipewright was built without CUDA";
  return p;
}

std::unique_ptr<CudaBackend> make_cuda_backend(const Model&, std::vector<LayerRange>, const Schedule&,
                                               const CudaBackendConfig&) {
  throw_bad_input("{}", cuda_not_built_text());
}

NumericalCheck check_against_cpu(const Model&, int, int, int, DType, std::uint64_t, Recompute) {
  throw_bad_input("{}", cuda_not_built_text());
}
#endif

}  // namespace pw
