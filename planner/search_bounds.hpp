#pragma once
// Lower bounds on what evaluate() reports, for pruning the configuration search. Each bound is derived
// from quantities the simulator also uses and never exceeds the simulated value (the proofs are in the
// comments of search_bounds.cpp), so a candidate whose bound is worse than the K-th best plan found can
// be dropped without changing the result. The split-independent bounds hold for every contiguous split,
// so they can drop a candidate before the partitioner runs.
#include <vector>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/layer_works.hpp"
#include "core/model.hpp"
#include "core/stage_costs.hpp"
#include "schedules/ir.hpp"

namespace pw {

// Per (tp, micro-batch size, recompute): what every layer costs, whatever the split and placement.
struct LayerTable {
  // Per layer, per tp rank (layer_work of the resolved workload; with per-stage recompute at full, the
  // least memory any level needs, while the times below are those without recompute).
  LayerWorks work;
  std::vector<double> fastest;       // per layer: F + B + W seconds on the fastest (GPU, tp link) class in use
  std::vector<double> fastest_fb;    // per layer: F + B seconds, likewise
  double total_time = 0;             // sum of `fastest`
  double max_time = 0;               // largest entry of `fastest`
  // Per layer: F + B + W and F + B without the expert-parallel all-to-alls (which an F&B composite may hide),
  // and B + W and B with them.
  std::vector<double> fastest_compute, fastest_fb_compute, fastest_bw, fastest_b;
  double parameters = 0;             // sum of work[i].parameters
  double activations = 0;            // sum of work[i].activation_bytes (one micro-batch)
};

// `tp_group_gpus`: the first GPU of every tp group the configurations may use (global ranks). `ep_links`: the
// cheapest all-to-all any placement of the ep group can have (least_all_to_all_links), charged to every MoE
// layer; the default charges none.
LayerTable make_layer_table(const Model& model, const Workload& resolved, int tp, const Cluster& cluster,
                            const CostModel& cost, const std::vector<int>& tp_group_gpus,
                            const AllToAllLinks& ep_links = {});

// A per-stage recompute table from the tables of no and of full recompute (make_layer_table's, without building
// them again): every stage is at least as fast as without recompute and needs at least the memory of full
// recompute, whatever level it takes.
LayerTable per_stage_table(const LayerTable& none, LayerTable full);

// The first GPU of each (GPU type, tp link) class among the tp groups starting at `tp_group_gpus`, in their order:
// what make_layer_table reads of them (a search asks once per tp, not once per table).
std::vector<int> distinct_tp_groups(const Cluster& cluster, int tp, const std::vector<int>& tp_group_gpus);

// The totals alone (parameters, activations; no work, no times), as make_layer_table sums them: all that
// memory_bound(t, pp, ...) reads, so that the search builds the whole table only for keys that bound leaves.
LayerTable make_layer_totals(const Model& model, const Workload& resolved);

// What bounds a schedule of F&B composites, each of which can hide one half's all-to-alls behind the other's
// compute: per layer the compute alone, or the forward alone, or the backward alone, whichever totals most.
// Its totals and the times step_time_bound(t, ...) reads, all it is for (no work, no per-part times).
LayerTable with_all_to_alls_hidden(const LayerTable& t);

// An ep group's all-to-all at its cheapest on a uniform cluster: as many peers as a node holds inside it, the
// rest across nodes. Any placement has at least ep - gpus_per_node peers in other nodes and a node's links are
// the faster, so no placement's all-to-all is cheaper. With the flex dispatcher a spread group moves less
// inside nodes, so only the network's part is kept (the node's link free). Clusters of several GPU types or
// measured links: none.
AllToAllLinks least_all_to_all_links(const Cluster& cluster, int ep, bool flex = false);

// Step time, over every contiguous split into pp x chunks stages and every schedule: the larger of
//   m x the busiest rank's F + B + W (for one chunk per rank the smallest possible largest stage;
//   otherwise the average over pp ranks or the largest layer), and
//   the fill and drain around any one stage k: its first F waits for F of every earlier stage, its m F
//   and m B follow one another on its rank, and its last B is followed by B of every earlier stage.
// With `copies` of the model (bidirectional DualPipe: each copy's pp x chunks / copies stages run m / copies
// micro-batches, every micro-batch on one copy) the largest layer and the fill count one copy's micro-batches.
double step_time_bound(const LayerTable& t, int pp, int chunks, int microbatches, int copies = 1);

// Memory, over every split and schedule: model state plus one micro-batch of activations of every
// stage, averaged over the pp ranks, plus the GPU's reserve. With copies of the model it holds too: each rank's
// state is of two parts, sharded over twice the data-parallel ranks, and it holds its own part's activations
// for one micro-batch of its copy.
double memory_bound(const LayerTable& t, int pp, double state_per_parameter, double reserve_bytes);

// What a schedule's order means for memory, whatever the split: per stage, the most micro-batches whose
// activations it holds in full at once (F done, its input gradient not yet).
struct ScheduleSummary {
  Placement placement;
  std::vector<int> max_full;
  // Per stage: how many micro-batches it holds in full at one allocation point of its rank, the point
  // where the rank holds the most in full over all its stages (several chunks are held at once there).
  std::vector<int> point_full;
};
ScheduleSummary summarize(const Schedule& compute_only);

// Memory over every split for this schedule, the largest of: memory_bound; the largest stage's model
// state and reserve plus its most fully held micro-batches of activations, minimised over contiguous
// splits (bisection; empty stages allowed, which only lowers the bound); and the average over ranks of
// state plus the activations held at each rank's point_full, minimised over contiguous splits (dynamic
// programme over layers and stages).
double memory_bound(const LayerTable& t, const ScheduleSummary& s, double state_per_parameter, double reserve_bytes);

// Each pipeline rank's peak memory for given stage costs, walking the order as the simulator does:
// model state plus the peak of the activations allocated at F and freed at B, W and BW, plus the largest
// working set of its stages.
std::vector<double> rank_peak_memory(const Schedule& compute_only, const std::vector<StageCost>& stages);

// Step time for a given split, cheaply: the longest rank's path (the forwards its first action waits for, its
// actions' F, B and W back to back, the backwards its last one leaves to the ranks before), then the slowest
// rank's optimizer step; at most step_time_bound. `order_fixed` false: the ranks' actions are known but not
// their order (zb-auto's, made from the stage costs), and the bound holds for any order of them. 0 for a
// schedule with F&B composites (a cost model may time the pair below its halves).
double rank_path_bound(const Schedule& compute_only, const std::vector<StageCost>& stages, bool order_fixed = true);

// Step time for a given split: the schedule timed as soon as possible with each transfer alone on its
// link (latency + bytes / bandwidth), then each rank's gradient reductions in arrival order after its
// stages' last weight gradients, then the slowest rank's optimizer step.
double step_time_bound(const Schedule& compute_only, const std::vector<StageCost>& stages,
                       const std::vector<int>& rank_gpu, const Cluster& cluster, const CostModel& cost);

// Candidates are dropped only when their bound exceeds the threshold by more than rounding: the bound
// and the simulator add the same numbers in different orders.
inline bool exceeds(double bound, double threshold) { return bound * (1 - 1e-9) > threshold; }

}  // namespace pw
