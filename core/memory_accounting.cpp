#include "core/memory_accounting.hpp"

namespace pw {

const char* to_string(MemoryAccounting accounting) {
  return accounting == MemoryAccounting::CpuFloat32 ? "cpu-float32" : "gpu-bf16";
}

}  // namespace pw
