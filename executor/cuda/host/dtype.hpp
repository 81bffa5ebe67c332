#pragma once
// The element type of the CUDA backend's activations and GEMM inputs (accumulation is always fp32).
#include <string>

namespace pw {

enum class DType { F32, BF16 };
// "bf16" or "fp32"; BadInput naming --dtype otherwise.
DType dtype_from_text(const std::string& text);
const char* to_string(DType dtype);
int dtype_bytes(DType dtype);

}  // namespace pw
