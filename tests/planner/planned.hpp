#pragma once
// A plan as the search returns it, for the export tests: the scenario resolved, its schedule generated,
// stage s holding `blocks[s]` transformer blocks (the embedding on the first stage, the head on the last),
// or DeepSpeed's uniform split when `blocks` is empty; predictions fixed so that goldens do not move with
// the cost model.
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/model.hpp"

#include "planner/baseline_splits.hpp"
#include "schedules/generators.hpp"
#include "sim/scenario.hpp"

namespace pw::test {

inline Evaluation planned(const Scenario& s, const std::vector<int>& blocks = {}) {
  Evaluation ev;
  ev.scenario = resolve(s);
  ev.schedule = make_schedule(schedule_spec(ev.scenario));
  ev.scenario.ranges = blocks.empty() ? uniform_split(s.model, ev.schedule.num_stages())
                                      : split_layers(s.model, ev.schedule.num_stages(), blocks);
  for (int st = 0; st < ev.schedule.num_stages(); ++st)
    ev.stages.push_back(StageReport{st, ev.schedule.placement.rank_of(st), ev.scenario.ranges[static_cast<size_t>(st)], {}});
  ev.metrics.step_time_s = 12.5;
  ev.metrics.peak_memory_bytes = 71.2e9;
  return ev;
}

// A preset model on DGX H100 nodes at tp x pp x dp with ep, a 1f1b schedule and the global batch: the
// scenario the export tests plan.
inline Scenario preset_scenario(const std::string& model, int tp, int pp, int dp, int ep, int global_batch) {
  Scenario s;
  s.model = model_preset(model);
  s.cluster = cluster_preset("dgx-h100");
  s.parallel.tp = tp;
  s.parallel.pp = pp;
  s.parallel.dp = dp;
  s.parallel.ep = ep;
  s.schedule = "1f1b";
  s.global_batch_size = global_batch;
  return s;
}

}  // namespace pw::test
