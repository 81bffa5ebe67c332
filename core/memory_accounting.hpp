#pragma once
// Which executor's memory the simulator counts: the bytes of an activation element and what each layer
// keeps from F for B and from B for W differ between a GPU framework and pipewright's CPU backend.
#include <string>

namespace pw {

enum class MemoryAccounting {
  // Megatron-LM on GPUs: bf16 activations, fp32 logits in the loss, 1-byte dropout masks (Korthikanti et
  // al. 2022); gradients for W are produced in B and not counted as kept.
  GpuBf16,
  // pipewright's CPU backend (executor/cpu_layers.hpp): float32 everywhere, every slot its F keeps for B,
  // and the inputs and output gradients its B keeps for a deferred W.
  CpuFloat32,
  // pipewright's CUDA backend (executor/cuda/cuda_layers.cpp) with --dtype bf16 or fp32: the CPU backend's
  // slots at that width (core/kept_bytes.hpp says where they differ).
  CudaBf16,
  CudaFloat32,
};

const char* to_string(MemoryAccounting accounting);  // "gpu-bf16", "cpu-float32", "cuda-bf16", "cuda-float32"
// The accounting a name gives; BadInput naming --memory-accounting otherwise.
MemoryAccounting memory_accounting_from_string(const std::string& text);

}  // namespace pw
