#pragma once
// A small as-soon-as-possible timer for compute orders, for schedule search (zb-auto) and quick
// comparisons: each rank runs its list in order, an action starts when the rank is free and its
// inputs are done; a tensor that crosses ranks arrives comm seconds after its producer ends. No
// link contention and no memory: the simulator (sim/) is the full model.
#include <vector>

#include "schedules/ir.hpp"

namespace pw {

struct StageTimes {
  std::vector<double> f, b, w;  // per stage: forward, input-gradient backward, weight-gradient backward
  std::vector<double> comm;     // per boundary s -> s + 1 (stages - 1 values), both directions; empty: free
  std::vector<double> fb;       // per stage: an F&B composite whose forward half is on this stage;
                                // empty or 0: the halves' F + B + W
  // Per stage, what a full backward (BW, a composite's backward half) saves over b + w
  // (StageCost::full_backward_saving_s); empty: nothing.
  std::vector<double> bw_saving;
  // Per stage, of f and of b, the expert all-to-alls an F&B composite hides behind its other half's compute
  // (core/overlapped_pair.hpp); empty: none.
  std::vector<double> comm_f, comm_b;
  // Per stage, of f and of b + w, the host's time to issue them (StageCost::host_forward_s, host_backward_s):
  // an F&B composite takes at least their sum; empty: none.
  std::vector<double> host_f, host_b;
  double all_to_all_sm_share = 0;  // CostModel::all_to_all_sm_share
  static StageTimes uniform(int stages, double f, double b, double w);
};

struct ScheduleTiming {
  double makespan = 0;                     // the last action's end
  std::vector<std::vector<double>> start;  // per rank, per list position (communication actions: 0 long)
  std::vector<std::vector<double>> end;
};

// Throws BadInput when `times` does not have one value per stage (comm: per boundary), and Runtime
// when the order cannot run to its end (validate() first for a readable message).
ScheduleTiming asap_timing(const Schedule& s, const StageTimes& times);
double asap_makespan(const Schedule& s, const StageTimes& times);

// asap_timing's makespan and, per stage, the start and end of its last action that makes weight gradients (W, BW,
// or the backward half of FB), 0 where none does: all the plan search's step bound reads, without every action's.
struct GradientTiming {
  double makespan = 0;
  std::vector<double> start, end;  // per stage
};
GradientTiming asap_gradient_timing(const Schedule& s, const StageTimes& times);

}  // namespace pw
