// The CUDA backend's entry points where the program has no CUDA (executor/cuda/none/CMakeLists.txt).
#include "core/error.hpp"
#include "executor/cuda/host/cuda_api.hpp"

namespace pw {

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

}  // namespace pw
