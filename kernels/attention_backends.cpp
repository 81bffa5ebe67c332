#include "kernels/attention_backends.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace pw {

namespace {

const std::vector<AttentionBackend>& backends() {
  static const std::vector<AttentionBackend> all{
      {"sglang", "fa3", {"fa3"}},
      {"sglang", "flashinfer", {"flashinfer"}},
      {"sglang", "triton", {"triton"}},
      {"sglang", "trtllm_mha", {"trtllm_mha"}},
      {"vllm", "FLASH_ATTN", {"vllm_flash_attn_fa3", "vllm_flash_attn_fa4"}},
      {"vllm", "FLASHINFER", {"vllm_flashinfer", "vllm_flashinfer_trtllmprefill", "vllm_flashinfer_trtllmdecode"}},
      {"vllm", "TRITON_ATTN", {"vllm_triton_attn"}},
      {"trtllm", "TRTLLM", {"torch_flow"}},
      {"trtllm", "FLASHINFER", {"torch_flow_flashinfer"}},
  };
  return all;
}

}  // namespace

const AttentionBackend& attention_backend(const std::string& engine, const std::string& name) {
  std::string names;
  for (const AttentionBackend& b : backends()) {
    if (b.engine != engine) continue;
    if (b.name == name) return b;
    names += (names.empty() ? "" : ", ") + b.name;
  }
  if (names.empty()) throw_bad_input("--attention-backend: the engine '{}' has no attention backends modelled", engine);
  throw_bad_input("--attention-backend: '{}' is not one of {}'s; use {}", name, engine, names);
}

}  // namespace pw
