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

double serving_pool_work(const Model& model, const ServingConfig& engine, int replicas,
                         const std::vector<ServingRequest>& requests, bool prefill_only) {
  return pool_steps(serving_load(requests, engine), replicas, engine.max_num_seqs, prefill_only) *
         static_cast<double>(model.layers.size());
}

WorkEstimate serving_plan_estimate(const Model& model, const Cluster& cluster, int gpus, bool disaggregate, int top,
                                   const ServingEngineFor& engine_for, const std::vector<ServingRequest>& requests) {
  std::vector<double> jobs;  // every configuration's work, the planner's candidates in its order
  double prefills = 0;       // the prefill pools': all simulated
  for (const auto& [tp, pp] : serving_engine_shapes(model, cluster, gpus))
    jobs.push_back(serving_pool_work(model, engine_for(tp, pp), gpus / (tp * pp), requests));
  if (model.transformer->moe)
    for (const DpAttentionShape& s : dp_attention_shapes(model, cluster, gpus, engine_for))
      jobs.push_back(serving_pool_work(model, engine_for(s.tp, 1), s.groups * s.dp, requests));
  if (disaggregate)
    for (int prefill_gpus : prefill_pool_sizes(gpus)) {
      const std::vector<PoolShape> prefill_shapes = pool_shapes(model, cluster, engine_for, prefill_gpus);
      for (const PoolShape& s : prefill_shapes)
        prefills += serving_pool_work(model, s.pool.engine, s.pool.replicas * s.dp, requests, true);
      for (const PoolShape& s : pool_shapes(model, cluster, engine_for, gpus - prefill_gpus)) {
        const double decode = serving_pool_work(model, s.pool.engine, s.pool.replicas * s.dp, requests);
        jobs.insert(jobs.end(), prefill_shapes.size(), decode);
      }
    }
  const size_t simulated = top > 0 ? std::min(jobs.size(), static_cast<size_t>(top)) : jobs.size();
  std::partial_sort(jobs.begin(), jobs.begin() + static_cast<std::ptrdiff_t>(simulated), jobs.end());
  double work = prefills;
  for (size_t i = 0; i < simulated; ++i) work += jobs[i];
  WorkEstimate w;
  const double steps = work / static_cast<double>(model.layers.size());
  // "the 10 cheapest of 472 configurations": no fewer are simulated; "472 configurations": all of them are.
  const std::string which = simulated == jobs.size() ? with_commas(static_cast<long>(jobs.size()))
                                                     : fmt::format("the {} cheapest of {}", with_commas(static_cast<long>(simulated)),
                                                                   with_commas(static_cast<long>(jobs.size())));
  w.work = fmt::format("{}{} configurations of {} GPUs x {} requests, about {} simulated steps of {} layers",
                       prefills > 0 ? "the prefill pools and " : "", which, gpus, requests.size(),
                       format_count(std::round(steps)), model.layers.size());
  w.seconds = work * kSecondsPerLayerStep;
  w.fix = kServingPlanFix;
  return w;
}

}  // namespace pw
