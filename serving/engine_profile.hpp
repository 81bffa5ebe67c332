#pragma once
// The serving engines pipewright models, each as its source schedules (docs/serving.md, "Engines", cites the
// files and commits): vLLM V1 (0.8 and later) and V0, SGLang and TensorRT-LLM. A profile is the engine's
// defaults for one GPU and degree: its scheduler's limits, what it reserves when it admits a request, whether
// a step mixes prefills and decodes, the KV cache's page and memory share, the batch sizes its decode CUDA
// graphs are captured at, and the host time a step exposes. The command line's engine options override them.
#include <string>
#include <tuple>
#include <vector>

#include "core/cluster.hpp"
#include "core/model.hpp"

namespace pw {

enum class ServingEngineKind { Vllm, Sglang, Trtllm };
const char* to_string(ServingEngineKind k);  // "vllm", "sglang", "trtllm"

// Which running request gives its pages back when a step runs short.
enum class ServingRetract {
  LatestAdmitted,   // vLLM: the last of the running queue, recomputed later
  FewestGenerated,  // SGLang's retract_decode: fewest output tokens first, then the longest prompt
};

struct EngineProfile {
  ServingEngineKind kind = ServingEngineKind::Vllm;
  std::string version;  // as given, or the version the defaults were read at
  std::string name;     // "vLLM V1", "vLLM V0", "SGLang", "TensorRT-LLM"
  int max_num_seqs = 256;
  long max_num_batched_tokens = 8192;
  bool chunked_prefill = true;
  // Admission reserves each request's output up to this many tokens ahead (and keeps it reserved while it
  // runs): TensorRT-LLM's guaranteed-no-evict all of it, SGLang its 4096-token clip; 0: a request is admitted
  // when its first chunk's pages are free (vLLM).
  long reserved_output_tokens = 0;
  ServingRetract retract = ServingRetract::LatestAdmitted;
  bool prefill_first = false;  // a step prefills or decodes, prefills first (SGLang; vLLM V0)
  int block_tokens = 16;       // the KV cache's page
  // The KV cache's memory: `memory_share` of the GPU less the weights and `reserve_bytes`, or of what the
  // weights and `reserve_bytes` leave (share_of_free). The share is the engine's own flag: vLLM's
  // --gpu-memory-utilization, SGLang's --mem-fraction-static (weights and cache: no reserve beside it),
  // TensorRT-LLM's free_gpu_memory_fraction.
  double memory_share = 0.9;
  bool share_of_free = false;
  double reserve_bytes = 2e9;
  // Decode-only steps are replayed as CUDA graphs captured at these batch sizes, a batch padded to the next
  // one; past the largest, or empty, a batch runs at its own size.
  std::vector<int> graph_batch_sizes;
  bool pad_to_graph = true;
  // Host time a step leaves exposed per sequence it carries (the scheduler and input preparation the GPU
  // waits for): vLLM's async scheduling leaves 150-170 us a 256-sequence step; V0 5-6 ms.
  double host_s_per_sequence = 0;
  // Steps with prefills run eagerly, every kernel launched by the host (SGLang before 0.5.10, whose prefill
  // CUDA graphs were opt-in), and the host's seconds a kernel when a step runs eagerly.
  bool eager_prefill = false;
  double launch_s = 9.2e-6;
};

// The engine's defaults for a model served at tp x pp on `gpu`. `version` empty: the newest modelled.
// BadInput naming --engine or --engine-version for one not modelled.
EngineProfile engine_profile(const std::string& engine, const std::string& version, const Model& model,
                             const GpuSpec& gpu, int tp, int pp);

// The host time one kernel launch costs in eager PyTorch (driver, runtime and dispatcher): the 3.3 ms an
// 8B model's decode step gains over its CUDA graph at 358 launches (docs/serving.md cites the measurement).
inline constexpr double kEagerLaunchSeconds = 9.2e-6;
// SGLang's eager forward, per kernel launched: DeepSeek-V3's prefill of one new token took 82.64 ms eagerly and
// 23.10 ms replayed from a CUDA graph (sgl-project/sglang PR 12160's scheduler logs), 59.54 ms over the 1,327
// kernels a forward of it launches at tp 8 (serving_layer_kernels): its Python modules' time beside the launches.
inline constexpr double kSglangEagerLaunchSeconds = 59.54e-3 / 1327;

}  // namespace pw
