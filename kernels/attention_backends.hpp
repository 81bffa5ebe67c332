#pragma once
// The attention backends a serving engine lets a user choose, by the engine's own names, and the kernels
// AIConfigurator's tables time each under (their kernel_source values): `--attention-backend` prices a run's
// attention from that backend's rows alone, and the exports launch the engine with it.
// - SGLang: `--attention-backend fa3|flashinfer|triton|trtllm_mha` (ATTENTION_BACKEND_CHOICES in
//   python/sglang/srt/arg_groups/choices.py, SGLang 0.5.23); its tables' sources are the same names.
// - vLLM: `--attention-backend FLASH_ATTN|FLASHINFER|TRITON_ATTN` (EngineArgs.attention_backend and
//   AttentionBackendEnum in vllm/v1/attention/backends/registry.py, vLLM 0.33.0; older releases read the
//   VLLM_ATTENTION_BACKEND environment variable, vllm/envs.py at vllm-project/vllm f218f9c2); its
//   tables time them as vllm_flash_attn_fa3 and _fa4 (FlashAttention 3 and 4), vllm_flashinfer (0.22) or
//   vllm_flashinfer_trtllmprefill and _trtllmdecode (0.24: FlashInfer's TensorRT-LLM kernels), vllm_triton_attn.
// - TensorRT-LLM (PyTorch backend): TRTLLM and FLASHINFER (torch_flow, torch_flow_flashinfer in its tables).
#include <string>
#include <vector>

namespace pw {

struct AttentionBackend {
  std::string engine;  // "vllm", "sglang", "trtllm"
  std::string name;    // as the engine names it
  std::vector<std::string> kernel_sources;  // the tables' kernel_source values that time it
};

// The backend `name` of `engine`; BadInput naming the engine's backends for one it does not have.
const AttentionBackend& attention_backend(const std::string& engine, const std::string& name);

}  // namespace pw
