#include "planner/serving_plan_estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/disaggregated_plan.hpp"
#include "planner/dp_attention_plan.hpp"

namespace pw {

ServingLoad serving_load(const std::vector<ServingRequest>& requests, const ServingConfig& engine) {
  ServingLoad l;
  for (const ServingRequest& r : requests) {
    l.requests += 1;
    l.outputs += static_cast<double>(r.output_tokens);
    l.prompt_chunks += engine.chunked_prefill ? std::ceil(static_cast<double>(r.prompt_tokens) /
                                                          static_cast<double>(engine.max_num_batched_tokens))
                                              : 1.0;
  }
  return l;
}

double pool_steps(const ServingLoad& load, int replicas, int max_num_seqs, bool prefill_only) {
  if (prefill_only) return load.prompt_chunks;
  const double share = load.requests / std::max(1, replicas);
  const double batch = std::max(1.0, std::min(share, static_cast<double>(max_num_seqs)));
  return load.outputs / batch + load.prompt_chunks;
}

WorkEstimate serving_plan_estimate(const Model& model, const Cluster& cluster, int gpus, bool disaggregate,
                                   const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests) {
  const double layers = static_cast<double>(model.layers.size());
  const ServingConfig engine = engine_for(1, 1);
  const ServingLoad load = serving_load(requests, engine);
  double steps = 0;
  long candidates = 0;
  for (const auto& [tp, pp] : serving_engine_shapes(model, cluster, gpus)) {
    steps += pool_steps(load, gpus / (tp * pp), engine.max_num_seqs);
    ++candidates;
  }
  if (model.transformer->moe)
    for (const DpAttentionShape& s : dp_attention_shapes(model, cluster, gpus)) {
      steps += pool_steps(load, s.groups * s.dp, engine.max_num_seqs);
      ++candidates;
    }
  if (disaggregate)
    for (int prefill_gpus : prefill_pool_sizes(gpus)) {
      const auto prefills = serving_engine_shapes(model, cluster, prefill_gpus);
      const auto decodes = serving_engine_shapes(model, cluster, gpus - prefill_gpus);
      steps += static_cast<double>(prefills.size()) * pool_steps(load, 1, engine.max_num_seqs, true);
      for (const auto& [tp, pp] : decodes)
        steps += static_cast<double>(prefills.size()) * pool_steps(load, (gpus - prefill_gpus) / (tp * pp), engine.max_num_seqs);
      candidates += static_cast<long>(prefills.size() * decodes.size());
    }
  WorkEstimate w;
  w.work = fmt::format("{} configurations of {} GPUs x {} requests, about {} simulated steps of {} layers", with_commas(candidates),
                       gpus, requests.size(), format_count(std::round(steps)), model.layers.size());
  w.seconds = steps * layers * kSecondsPerLayerStep;
  w.fix = "plan fewer GPUs (--gpus), fewer requests or leave out --disaggregate";
  return w;
}

}  // namespace pw
