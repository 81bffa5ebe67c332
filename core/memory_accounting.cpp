#include "core/memory_accounting.hpp"

#include "core/error.hpp"

namespace pw {

const char* to_string(MemoryAccounting accounting) {
  switch (accounting) {
    case MemoryAccounting::GpuBf16: return "gpu-bf16";
    case MemoryAccounting::CpuFloat32: return "cpu-float32";
    case MemoryAccounting::CudaBf16: return "cuda-bf16";
    case MemoryAccounting::CudaFloat32: return "cuda-float32";
  }
  return "?";
}

MemoryAccounting memory_accounting_from_string(const std::string& text) {
  for (MemoryAccounting m : {MemoryAccounting::GpuBf16, MemoryAccounting::CpuFloat32, MemoryAccounting::CudaBf16,
                             MemoryAccounting::CudaFloat32})
    if (text == to_string(m)) return m;
  throw_bad_input("--memory-accounting: unknown accounting '{}'; use gpu-bf16, cpu-float32, cuda-bf16 or cuda-float32",
                  text);
}

}  // namespace pw
