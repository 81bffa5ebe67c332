#include "serving/serving_sim.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "core/layer_work.hpp"
#include "serving/serving_engine.hpp"

namespace pw {

SchedulerLimits vllm_serve_defaults(const GpuSpec& gpu) {
  std::string name = gpu.name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  SchedulerLimits l;
  if (gpu.memory_bytes >= 70.0 * 1024 * 1024 * 1024 && name.find("a100") == std::string::npos) {
    l.max_num_seqs = 1024;
    l.max_num_batched_tokens = 8192;
  }
  return l;
}

void ServingConfig::apply(const EngineProfile& p) {
  engine_name = p.name;
  engine_version = p.version;
  max_num_seqs = p.max_num_seqs;
  max_num_batched_tokens = p.max_num_batched_tokens;
  chunked_prefill = p.chunked_prefill;
  reserved_output_tokens = p.reserved_output_tokens;
  retract = p.retract;
  prefill_first = p.prefill_first;
  block_tokens = p.block_tokens;
  gpu_memory_utilization = p.memory_share;
  kv_share_of_free = p.share_of_free;
  activation_reserve_bytes = p.reserve_bytes;
  graph_batch_sizes = p.graph_batch_sizes;
  pad_to_graph = p.pad_to_graph;
  host_s_per_sequence = p.host_s_per_sequence;
  eager_prefill = p.eager_prefill;
  launch_s = p.launch_s;
}

ServingEngineFor same_engine(const ServingConfig& c) {
  return [c](int tp, int pp) {
    ServingConfig e = c;
    e.tp = tp;
    e.pp = pp;
    e.stages.clear();
    return e;
  };
}

ServingStageRuns serving_stage_runs(const Model& model, const LayerRange& layers, int tp, KvCacheDtype kv_dtype,
                                    ServingWeights weights) {
  // A run of same-shape blocks shares one work (making it for every layer of every step was 40% of serve plan's
  // time) and is priced as one run (the cost model answers once where it can).
  ServingStageRuns stage;
  for (int i = layers.first; i <= layers.last;) {
    const Layer& l = model.layers[static_cast<size_t>(i)];
    int run = 1;
    while (i + run <= layers.last && same_layer_shape(model, l, model.layers[static_cast<size_t>(i + run)])) ++run;
    if (l.kind != LayerKind::Mtp) stage.runs.emplace_back(serving_layer_shape(model, l, tp, kv_dtype, weights), run);
    i += run;
  }
  return stage;
}

double serving_stage_time(const ServingStageRuns& stage, const ServingBatch& batch, const GpuSpec& gpu,
                          const LinkSpec& tp_link, const CostModel& cost) {
  double time = 0;
  for (const auto& [shape, run] : stage.runs)
    time = cost.add_serving_times(time, *shape.layer, serving_layer_work(shape, batch), gpu, tp_link, shape.tp, run);
  return time;
}

double serving_stage_time(const Model& model, const LayerRange& layers, int tp, const ServingBatch& batch,
                          const GpuSpec& gpu, const LinkSpec& tp_link, const CostModel& cost, KvCacheDtype kv_dtype,
                          ServingWeights weights) {
  return serving_stage_time(serving_stage_runs(model, layers, tp, kv_dtype, weights), batch, gpu, tp_link, cost);
}

double speculative_tokens_per_step(int drafted, double a) {
  return a >= 1 ? drafted + 1.0 : (1 - std::pow(a, drafted + 1)) / (1 - a);
}

long speculative_tokens_at_step(long step, int drafted, double a) {
  const double e = speculative_tokens_per_step(drafted, a);
  // A hair above each product: 1.75 x 4 is 7 whichever way the multiplication rounds.
  const auto tokens_by = [&](long steps) { return static_cast<long>(std::floor(static_cast<double>(steps) * e + 1e-9)); };
  return tokens_by(step + 1) - tokens_by(step);
}

ServingResult simulate_serving(const Model& model, const Cluster& cluster, const CostModel& cost,
                               const ServingConfig& config, const std::vector<ServingRequest>& requests) {
  if (!model.transformer) throw_bad_input("model '{}' gives explicit per-layer costs; serving needs a transformer", model.name);
  ServingEngine engine(model, cluster, cost, config, requests);
  return engine.run();
}

}  // namespace pw
