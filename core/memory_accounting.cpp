#include "core/memory_accounting.hpp"

#include "core/error.hpp"

namespace pw {

const char* to_string(MemoryAccounting accounting) {
  return accounting == MemoryAccounting::CpuFloat32 ? "cpu-float32" : "gpu-bf16";
}

MemoryAccounting memory_accounting_from_string(const std::string& text) {
  for (MemoryAccounting m : {MemoryAccounting::GpuBf16, MemoryAccounting::CpuFloat32})
    if (text == to_string(m)) return m;
  throw_bad_input("--memory-accounting: unknown accounting '{}'; use gpu-bf16 or cpu-float32", text);
}

}  // namespace pw
