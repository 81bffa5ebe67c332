#pragma once
// Where a simulated step goes, as seen from the busiest pipeline rank (the one whose compute binds): its
// busy time split into compute and what the cost model charges inside the compute actions (recompute, tp
// collectives, the cp ring's exposed wait, the ep all-to-alls), and its idle time into the exposed
// point-to-point transfers, the data-parallel reduction left after the last backward, the optimizer step
// and the pipeline bubble. The parts sum to the step time.
//
//   tp:        each layer's phases with the tp link as measured minus with a free link
//   recompute: each layer's backward at its recompute level minus without recompute (its collectives too)
//   pp:        the step minus the same plan's step with free point-to-point links (what transfers cost the
//              step), plus any slowdown of compute by transfers in flight
//   dp:        the reduction exposed after the last compute, and ZeRO-3's weight gathers waited for inside F and B
//   bubble:    the rest of the idle time (fill, drain, and waits of the schedule's dependencies)
#include "core/cost_model.hpp"
#include "sim/scenario.hpp"

namespace pw {

struct StepBreakdown {
  int rank = 0;  // the pipeline rank whose view this is
  double step_s = 0;
  // Its busy time:
  double compute_s = 0, recompute_s = 0, tp_s = 0, cp_s = 0, ep_s = 0;
  // Its GPU waiting for the host to issue MoE blocks (CostModel::host_time above the phases' GPU time).
  double host_s = 0;
  // The rest of the step:
  double pp_s = 0, dp_s = 0, optimizer_s = 0, bubble_s = 0;
};

// Simulates the plan once more with free point-to-point links (for pp).
StepBreakdown break_down(const Evaluation& ev, const CostModel& cost);

}  // namespace pw
