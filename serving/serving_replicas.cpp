#include "serving/serving_replicas.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "serving/serving_engine.hpp"

namespace pw {

std::vector<ServingRequest> dealt_to(const std::vector<ServingRequest>& requests, int r, int copies) {
  std::vector<ServingRequest> mine;
  for (size_t i = static_cast<size_t>(r); i < requests.size(); i += static_cast<size_t>(copies)) mine.push_back(requests[i]);
  return mine;
}

int concurrency_share(int concurrency, int r, int copies) {
  return concurrency > 0 ? std::max(1, concurrency / copies + (r < concurrency % copies ? 1 : 0)) : concurrency;
}

ServingResult simulate_copies(const ServingConfig& engine, int copies, const std::vector<ServingRequest>& requests,
                              const ServingUnit& one) {
  ServingResult all;
  all.requests.resize(requests.size());
  ServingConfig c = engine;
  // Copy r takes requests r, r + copies, ...: past the request count every copy is idle, and 2^31 of them took
  // 7 s to find that out one by one.
  const int busy = static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(copies, 0)), requests.size()));
  // A copy dealt the same requests as the one before it, at the same concurrency, serves them alike (a run is
  // deterministic): its result is the same (1,000 GPUs of identical requests: hundreds of copies, one run).
  std::vector<ServingRequest> previous;
  ServingResult unit;
  for (int r = 0; r < busy; ++r) {
    std::vector<ServingRequest> mine = dealt_to(requests, r, copies);
    if (mine.empty()) continue;
    const int concurrency = concurrency_share(engine.concurrency, r, copies);
    if (previous.empty() || mine != previous || concurrency != c.concurrency) {
      c.concurrency = concurrency;
      unit = one(c, mine);
      previous = std::move(mine);
    }
    merge_engine_result(all, unit, static_cast<size_t>(r), static_cast<size_t>(copies));
    all.batches += unit.batches;
  }
  all.token_gaps.settle();
  return all;
}

ServingResult simulate_replicas(const Model& model, const Cluster& cluster, const CostModel& cost, ServingConfig engine,
                                int replicas, const std::vector<ServingRequest>& requests) {
  return simulate_copies(engine, replicas, requests, [&](const ServingConfig& c, const std::vector<ServingRequest>& mine) {
    return simulate_serving(model, cluster, cost, c, mine);
  });
}

void merge_engine_result(ServingResult& all, const ServingResult& one, size_t r, size_t engines) {
  for (size_t j = 0; j < one.requests.size(); ++j) all.requests[r + j * engines] = one.requests[j];
  all.makespan_s = std::max(all.makespan_s, one.makespan_s);
  all.preemptions += one.preemptions;
  all.max_running = std::max(all.max_running, one.max_running);
  all.peak_kv_use = std::max(all.peak_kv_use, one.peak_kv_use);
  all.kv_capacity_tokens = one.kv_capacity_tokens;
  all.stage_busy_s.resize(one.stage_busy_s.size(), 0.0);
  for (size_t s = 0; s < one.stage_busy_s.size(); ++s) all.stage_busy_s[s] += one.stage_busy_s[s] / static_cast<double>(engines);
  all.token_gaps.add(one.token_gaps);  // settled by the caller once every engine is in
}

ServingFloor serving_floor(const Model& model, const Cluster& cluster, const CostModel& cost, const ServingConfig& engine,
                           const std::vector<ServingRequest>& requests) {
  ServingFloor floor;
  if (!cost.serving_time_monotone() || !model.transformer) return floor;
  static const std::vector<ServingRequest> none;
  try {
    const ServingEngine one(model, cluster, cost, engine, none);
    for (const ServingRequest& r : requests) {
      if (r.output_tokens < 2) continue;
      const double gap = one.token_gap_floor_s(r.prompt_tokens + 1);
      const double arrival = engine.concurrency > 0 ? 0.0 : r.arrival_s;
      floor.token_gap_s.push_back(gap);
      floor.makespan_s = std::max(floor.makespan_s, arrival + static_cast<double>(r.output_tokens - 1) * gap);
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;
    return {};
  }
  return floor;
}

}  // namespace pw
