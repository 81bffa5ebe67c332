#pragma once
// The ways a run goes on when some of its GPUs fail, as a practitioner weighs them: keep the layout and
// drop the data-parallel replicas the failure broke (the global batch may move within a tolerance), keep
// tp, cp, dp and the batch and re-split the layers over fewer pipeline ranks, or re-plan everything on
// what is left with the same batch (a data-parallel degree fixed for the whole run no longer holds). Each is simulated on the GPUs left; the answers are ranked by tokens
// per second (every way restarts the job, so the restart costs them alike).
#include <optional>
#include <string>
#include <vector>

#include "planner/search.hpp"

namespace pw {

enum class RecoveryWay { DropReplicas, Resplit, Replan };
const char* to_string(RecoveryWay way);

// How far the global batch may move when replicas are dropped, by default: 2%.
constexpr double kDefaultBatchTolerance = 0.02;
// The largest tolerance accepted: a batch moved by more is a different training run.
constexpr double kMaxBatchTolerance = 0.5;

struct RecoveryAnswer {
  RecoveryWay way = RecoveryWay::Replan;
  std::optional<Plan> plan;  // none: this way does not work here
  std::string verdict;       // then why
};

// Drop replicas: tp, cp, pp, the split, schedule and micro-batch size of `before`; as many replicas as the
// `gpus_left` hold on `left` (the cluster after the failure), each running the micro-batch count that keeps
// the global batch nearest its own, within `batch_tolerance`, that the schedule takes and memory holds.
RecoveryAnswer drop_replicas(const Plan& before, const Cluster& left, int gpus_left, double batch_tolerance,
                             const CostModel& cost);

// Re-split: tp, cp, ep, etp, dp, the micro-batch size, precision and the global batch of `before`; the
// pipeline shortened to what the GPUs left hold, its split, schedule and recomputation searched.
RecoveryAnswer resplit(const Plan& before, const Scenario& left, int gpus_left, const CostModel& cost,
                       const SearchOptions& options);

// The answers ranked: those with a plan by tokens per second (ties by way), then those without.
void rank_answers(std::vector<RecoveryAnswer>& answers);

}  // namespace pw
