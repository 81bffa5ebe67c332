#pragma once
// Expert parallelism as Megatron-Core's "parallel folding" places it (megatron/core/parallel_state.py,
// initialize_model_parallel, order tp-cp-ep-dp-pp): a stage's tp x cp x dp GPUs, numbered tp fastest, then
// cp, then dp, are renumbered for the MoE layers as etp fastest, then ep, then the expert-data-parallel
// rank. One ep group is ep GPUs etp apart in that numbering; the expert-data-parallel group, which reduces
// the routed experts' gradients, is the expert_dp GPUs etp x ep apart.
#include <vector>

#include "core/cluster.hpp"
#include "core/model.hpp"
#include "core/workload.hpp"

namespace pw {

// An expert taking more than a million times the average (every token of a million experts) is beyond any
// model; BadInput naming --capacity-factor outside 0 (dropless) to that, NaN included.
inline constexpr double kMaxCapacityFactor = 1e6;
void check_capacity_factor(double factor);

// Throws BadInput naming --ep, --etp or the option at fault when the configuration cannot run the model's
// experts: expert parallelism without experts, ep not dividing the routed experts, etp not dividing an
// expert's intermediate size, ep x etp not dividing the tp x cp x dp GPUs it folds into, tp without
// sequence parallelism (Megatron-Core's MoE layers need it), a negative capacity factor.
void check_expert_parallel(const Model& model, const ParallelConfig& pc, const Workload& w);

// The global ranks of one folded group counted from a stage's GPU `first_gpu` (a tp rank 0 of a dp replica):
// the GPUs at folded indices first, first + stride, ..., n of them, past it.
std::vector<int> folded_group(const ParallelConfig& pc, int first_gpu, int first, int stride, int n);
// The ep group and the expert-data-parallel group that start at `first_gpu`.
std::vector<int> ep_group(const ParallelConfig& pc, int first_gpu);
std::vector<int> expert_dp_group(const ParallelConfig& pc, int first_gpu);

// What an all-to-all over an ep group crosses, seen from one member: how many of the others share its node
// and the slowest link to them, how many are in other nodes and the slowest link there. All members of a
// folded group sit alike when the group is regular (every node holds as many of them), which the fold makes
// it; the first member stands for them.
struct AllToAllLinks {
  int ranks = 1;
  int in_node = 0;
  int across = 0;
  LinkSpec in_node_link;
  LinkSpec across_link;
  LinkSpec etp_link;  // the etp group's (etp consecutive GPUs)
  int etp = 1;
  // The GPU the group runs on: a measured cost model prices an all-to-all from its tables only on the GPU they
  // were measured on (unnamed: never).
  GpuSpec gpu;
};
AllToAllLinks all_to_all_links(const Cluster& cluster, const ParallelConfig& pc, int first_gpu);

// The nodes one ep group spans (the group of GPU 0's stage), 1 on the ideal cluster.
int ep_group_nodes(const Cluster& cluster, const ParallelConfig& pc);

// The slowest link of the ring through a folded group's GPUs in order (closing back to the first), as
// group_link finds it for evenly spaced ranks; the free link for fewer than 2.
LinkSpec folded_ring_link(const Cluster& cluster, const ParallelConfig& pc, int first_gpu, int stride, int n);

}  // namespace pw
