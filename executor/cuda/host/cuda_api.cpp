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


}  // namespace pw
