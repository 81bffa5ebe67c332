// The CUDA profiler's entry point where the program has no CUDA (profiler/cuda/none/CMakeLists.txt).
#include "core/error.hpp"
#include "profiler/cuda/host/cuda_profiler_api.hpp"

namespace pw {

CudaProfileResult profile_cuda(const Model&, const CudaProfileRequest&) { throw_bad_input("{}", cuda_not_built_text()); }

}  // namespace pw
