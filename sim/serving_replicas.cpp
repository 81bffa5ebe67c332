#include "sim/serving_replicas.hpp"

#include <algorithm>

namespace pw {

ServingResult simulate_replicas(const Model& model, const Cluster& cluster, const CostModel& cost, ServingConfig engine,
                                int replicas, const std::vector<ServingRequest>& requests) {
  ServingResult all;
  all.requests.resize(requests.size());
  const int concurrency = engine.concurrency;
  for (int r = 0; r < replicas; ++r) {
    std::vector<ServingRequest> mine;
    for (size_t i = static_cast<size_t>(r); i < requests.size(); i += static_cast<size_t>(replicas)) mine.push_back(requests[i]);
    if (mine.empty()) continue;
    if (concurrency > 0) engine.concurrency = std::max(1, concurrency / replicas + (r < concurrency % replicas ? 1 : 0));
    const ServingResult one = simulate_serving(model, cluster, cost, engine, mine);
    for (size_t j = 0; j < one.requests.size(); ++j)
      all.requests[static_cast<size_t>(r) + j * static_cast<size_t>(replicas)] = one.requests[j];
    all.makespan_s = std::max(all.makespan_s, one.makespan_s);
    all.preemptions += one.preemptions;
    all.batches += one.batches;
    all.max_running = std::max(all.max_running, one.max_running);
    all.peak_kv_use = std::max(all.peak_kv_use, one.peak_kv_use);
    all.kv_capacity_tokens = one.kv_capacity_tokens;
    all.stage_busy_s.resize(one.stage_busy_s.size(), 0.0);
    for (size_t s = 0; s < one.stage_busy_s.size(); ++s) all.stage_busy_s[s] += one.stage_busy_s[s] / replicas;
  }
  return all;
}

}  // namespace pw
