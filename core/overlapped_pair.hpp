#pragma once
// An F&B composite whose halves' expert all-to-alls overlap the other half's compute (DualPipe's overlap,
// Megatron-Core's combined 1F1B): what the simulator and the bounds charge it.

namespace pw {

// Seconds of a forward (forward_s, of which forward_comm_s all-to-alls) run with a full backward of another
// micro-batch (backward_s, of which backward_comm_s): each half's compute, plus what of its all-to-alls the
// other half's compute does not cover, plus `sm_share` of the covered time: the all-to-all kernels hold that
// share of the GPU's SMs while they run, and the compute beside them loses it (CostModel::all_to_all_sm_share).
// Without all-to-alls, the halves' sum. Never below the longer half nor below both halves' compute, never
// above the halves' sum. (The host's time to issue both halves floors the composite on top of this: the
// simulator and asap_timing take the longer.)
inline double overlapped_pair_time(double forward_s, double forward_comm_s, double backward_s, double backward_comm_s,
                                   double sm_share) {
  const double forward_compute = forward_s - forward_comm_s;
  const double backward_compute = backward_s - backward_comm_s;
  const double uncovered_forward = forward_comm_s > backward_compute ? forward_comm_s - backward_compute : 0.0;
  const double uncovered_backward = backward_comm_s > forward_compute ? backward_comm_s - forward_compute : 0.0;
  const double covered = forward_comm_s - uncovered_forward + backward_comm_s - uncovered_backward;
  return forward_compute + backward_compute + uncovered_forward + uncovered_backward + sm_share * covered;
}

}  // namespace pw
