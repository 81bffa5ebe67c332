#pragma once
// A search candidate as the search screens it: resolved, its schedule generated, split by the partitioner's
// first bottleneck-optimal split (for the tests that hold the bounds against evaluate()).
#include <catch2/catch.hpp>

#include <vector>

#include "core/cost_model.hpp"
#include "core/error.hpp"
#include "planner/partitioner.hpp"
#include "planner/search.hpp"
#include "schedules/generators.hpp"

namespace pw::test {

// False when the candidate is invalid or no split fits (BadInput); sets `s` to the split scenario otherwise.
inline bool screened(const Scenario& base, const Candidate& c, const CostModel& cost, Scenario& s) {
  try {
    s = resolve(candidate_scenario(base, c));
    ScheduleSpec spec;
    spec.name = s.schedule;
    spec.ranks = s.parallel.pp;
    spec.microbatches = s.parallel.microbatches;
    spec.chunks = chunks_per_rank(s.schedule, s.parallel.vpp);
    const Schedule schedule = make_schedule(spec);
    PartitionOptions po;
    po.simulate = false;
    po.schedule = &schedule;
    PartitionResult r = best_partition(s, cost, po);
    s.ranges = r.ranges;
    s.stage_recompute = r.stage_recompute;
  } catch (const Error& e) {
    REQUIRE(e.kind() == ErrorKind::BadInput);
    return false;
  }
  return true;
}

// The first GPU of every tp group of the configuration (make_layer_table's tp_group_gpus).
inline std::vector<int> tp_group_gpus(const ParallelConfig& pc) {
  std::vector<int> groups;
  for (int g = 0; g < pc.gpus(); g += pc.tp) groups.push_back(g);
  return groups;
}

}  // namespace pw::test
