#include "serving/engine_profile.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/error.hpp"
#include "serving/serving_sim.hpp"

namespace pw {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// "0.6.3.post1" -> {0, 6}; BadInput for what does not start with MAJOR.MINOR.
std::pair<int, int> major_minor(const std::string& version) {
  int major = 0, minor = 0;
  char dot = 0;
  if (std::sscanf(version.c_str(), "%d%c%d", &major, &dot, &minor) != 3 || dot != '.' || major < 0 || minor < 0)
    throw_bad_input("--engine-version: '{}' is not a version; give MAJOR.MINOR[.PATCH] (e.g. 0.6.3)", version);
  return {major, minor};
}

// MAJOR.MINOR.PATCH of a version ("0.5.6.post1": 0, 5, 6; a missing patch 0).
std::tuple<int, int, int> major_minor_patch(const std::string& version) {
  major_minor(version);  // BadInput for a version that is none
  int major = 0, minor = 0, patch = 0;
  std::sscanf(version.c_str(), "%d.%d.%d", &major, &minor, &patch);
  return {major, minor, std::max(patch, 0)};
}

std::vector<int> steps(int from, int to, int by) {
  std::vector<int> out;
  for (int b = from; b <= to; b += by) out.push_back(b);
  return out;
}

std::vector<int> joined(std::initializer_list<std::vector<int>> parts) {
  std::vector<int> out;
  for (const std::vector<int>& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// vLLM V1 (vllm/config/compilation.py): 1, 2, 4, then 8 to 256 by 8 and 272 to 512 by 16, padded up.
EngineProfile vllm_v1(const GpuSpec& gpu) {
  EngineProfile p;
  p.kind = ServingEngineKind::Vllm;
  p.name = "vLLM V1";
  p.version = "0.34.0";
  const SchedulerLimits l = vllm_serve_defaults(gpu);
  p.max_num_seqs = l.max_num_seqs;
  p.max_num_batched_tokens = l.max_num_batched_tokens;
  p.graph_batch_sizes = joined({{1, 2, 4}, steps(8, 256, 8), steps(272, 512, 16)});
  // Async scheduling (on by default): the 150-170 us left between two 256-sequence steps (vLLM PR 11133).
  p.host_s_per_sequence = 165e-6 / 256;
  return p;
}

// vLLM V0 (0.6.3 vllm/config.py, SchedulerConfig): 256 sequences, a budget of max(max_model_len, 2048)
// without chunked prefill (off below a 32K context), prefill-only or decode-only steps with prefills first.
EngineProfile vllm_v0(const Model& model) {
  EngineProfile p;
  p.kind = ServingEngineKind::Vllm;
  p.name = "vLLM V0";
  p.version = "0.6.3";
  p.max_num_seqs = 256;
  p.max_num_batched_tokens = std::max<long>(model.default_seq_len(), 2048);
  p.chunked_prefill = false;
  p.prefill_first = true;
  p.graph_batch_sizes = joined({{1, 2, 4}, steps(8, 256, 8)});
  // The engine waits for its scheduler and input preparation: 5-6 ms between two 256-sequence steps
  // (vLLM issue 10634, before async scheduling).
  p.host_s_per_sequence = 5.5e-3 / 256;
  return p;
}

// SGLang (python/sglang/srt, 0.5.x): prefill-first steps, admission reserving min(output, 4096) tokens of
// each request (the ratio is 1 for ignore_eos requests, as the benchmarks send), retraction of the request
// with the fewest outputs, page 1, and the GPU-memory tiers of arg_groups/memory_hook.py.
EngineProfile sglang(const Model& model, const GpuSpec& gpu, int tp, int pp) {
  EngineProfile p;
  p.kind = ServingEngineKind::Sglang;
  p.name = "SGLang";
  p.version = "0.5.23";
  const double mib = gpu.memory_bytes / kMiB;
  const long chunk = mib < 20 * 1024 ? 2048 : mib < 60 * 1024 ? 4096 : mib < 160 * 1024 ? 8192 : 16384;
  int max_bs = mib < 20 * 1024 ? 8 : mib < 35 * 1024 ? (tp < 4 ? 48 : 160) : mib < 60 * 1024 ? (tp < 4 ? 32 : 160)
             : mib < 160 * 1024 ? (tp < 4 ? 256 : 512) : 512;
  p.max_num_batched_tokens = chunk;
  p.max_num_seqs = 2048;  // resolve_max_num_reqs' floor (2048 to 4096, at most half the cache's tokens)
  p.reserved_output_tokens = 4096;  // SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
  p.retract = ServingRetract::FewestGenerated;
  p.prefill_first = true;
  p.block_tokens = 1;
  std::vector<int> sizes = joined({{1, 2, 4, 8, 12}, steps(16, 256, 8), steps(272, 496, 16), steps(512, max_bs, 32)});
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(), [&](int b) { return b > max_bs; }), sizes.end());
  if (sizes.empty() || sizes.back() != max_bs) sizes.push_back(max_bs);
  p.graph_batch_sizes = sizes;
  // mem_fraction_static = (gpu - reserved) / gpu, reserved in MiB: 512, 1.5 per activation token, tp x pp / 8 GiB,
  // the decode graphs (2 a batch size) and prefill graphs (8 a token bucket; 1.5 GiB with latent attention),
  // at least 10 GiB on GPUs over 60 GiB.
  int prefill_buckets = 0;
  for (int b : joined({steps(4, 32, 4), steps(48, 256, 16), steps(288, 512, 32), steps(576, 1024, 64),
                       steps(1280, 4096, 256), steps(4608, static_cast<int>(chunk), 512)}))
    if (b <= chunk) ++prefill_buckets;
  const bool mla = model.transformer && model.transformer->mla.has_value();
  double reserved = 512 + 1.5 * static_cast<double>(std::max<long>(chunk, 2048)) + tp * pp / 8.0 * 1024 + 2.0 * max_bs +
                    (mla ? 1.5 * 1024 : 8.0 * prefill_buckets);
  if (mib > 60 * 1024) reserved = std::max(reserved, 10.0 * 1024);
  p.memory_share = std::round((mib - reserved) / mib * 1000) / 1000;
  p.reserve_bytes = 0;
  return p;
}

// TensorRT-LLM (PyTorch backend, tensorrt_llm/llmapi/llm_args.py and _torch/pyexecutor): guaranteed-no-evict
// (each request's whole output reserved at admission), 2048 requests and 8192 tokens a step, context and
// generation mixed, chunked context off, pages of 32 tokens, 0.9 of the memory left after loading, decode
// graphs at 1 to 32, 64 and 128 without padding.
EngineProfile trtllm() {
  EngineProfile p;
  p.kind = ServingEngineKind::Trtllm;
  p.name = "TensorRT-LLM";
  p.version = "1.0";
  p.max_num_seqs = 2048;
  p.max_num_batched_tokens = 8192;
  p.chunked_prefill = false;
  p.reserved_output_tokens = std::numeric_limits<long>::max();
  p.block_tokens = 32;
  p.share_of_free = true;
  p.graph_batch_sizes = joined({steps(1, 32, 1), {64, 128}});
  p.pad_to_graph = false;
  return p;
}

}  // namespace

const char* to_string(ServingEngineKind k) {
  switch (k) {
    case ServingEngineKind::Vllm: return "vllm";
    case ServingEngineKind::Sglang: return "sglang";
    case ServingEngineKind::Trtllm: return "trtllm";
  }
  return "?";
}

EngineProfile engine_profile(const std::string& engine, const std::string& version, const Model& model,
                             const GpuSpec& gpu, int tp, int pp) {
  EngineProfile p;
  if (engine == "vllm") {
    // V1 became vLLM's engine in 0.8.0.
    p = !version.empty() && major_minor(version) < std::pair<int, int>{0, 8} ? vllm_v0(model) : vllm_v1(gpu);
  } else if (engine == "sglang") {
    p = sglang(model, gpu, tp, pp);
    p.launch_s = kSglangEagerLaunchSeconds;
    // Prefill CUDA graphs (piecewise) are SGLang's default from 0.5.10 (server_args.py: 0.5.9's
    // enable_piecewise_cuda_graph = False became 0.5.10's disable_piecewise_cuda_graph = False); before, every
    // step with prefills ran eagerly. From 0.5.10 on, pp > 1 still turns them off (_handle_piecewise_cuda_graph).
    p.eager_prefill = (!version.empty() && major_minor_patch(version) < std::tuple<int, int, int>{0, 5, 10}) || pp > 1;
  } else if (engine == "trtllm") {
    if (!version.empty()) major_minor(version);
    p = trtllm();
  } else {
    throw_bad_input("--engine: '{}' is not one; use vllm, sglang or trtllm", engine);
  }
  if (!version.empty()) p.version = version;
  return p;
}

}  // namespace pw
