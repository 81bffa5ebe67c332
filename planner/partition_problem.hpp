#pragma once
// The numbers the partitioner optimises over, taken once from a resolved scenario: prefix sums of each
// layer's F + B + W time per GPU type, of parameters and activation bytes, the bytes crossing each
// layer boundary (graph edges included), the links between neighbouring stages, and each rank's
// activation profile from the schedule. With them, any stage's time and memory cost O(1).
#include <algorithm>
#include <memory>
#include <vector>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/layer_works.hpp"
#include "core/stage_costs.hpp"
#include "planner/range_max.hpp"
#include "schedules/ir.hpp"
#include "sim/scenario.hpp"

namespace pw {

// A rank's activation holdings at one allocation point of its action order: per chunk (the rank's
// stages in stage order), how many micro-batches hold their whole activations (F done, B not) and
// how many hold only the W inputs (B done, W not). The rank's activation bytes there are
// sum_c full[c] A_c + partial[c] WG_c, A_c and WG_c the chunk's activation and weight-gradient bytes.
struct Holding {
  std::vector<int> full;
  std::vector<int> partial;
};

// A transfer of `bytes` alone on a link: latency + bytes / bandwidth.
inline double one_way(const LinkSpec& l, double bytes) { return l.latency_s + bytes / l.bandwidth_bytes_per_s; }

// With two copies of the model (bidirectional DualPipe, Schedule::copies) the split is of one copy's P parts, and
// pipeline ranks v and P - 1 - v hold the same two, parts v and P - 1 - v, each running one copy's micro-batches
// through them: the problem's ranks are those P / 2 pairs (a V placement of P parts), a pair's holdings those of
// either rank, its memory the smaller GPU's, and each part's activation crosses to the next part's rank.
struct PartitionProblem {
  int layers = 0;
  int stages = 0;  // the parts of one copy
  int ranks = 0;   // pipeline ranks, or with copies their pairs
  int copies = 1;
  std::vector<int> stage_rank;   // stage -> pipeline rank (its pair with copies)
  std::vector<int> stage_chunk;  // stage -> its index among its rank's stages
  std::vector<int> rank_gpu;     // pipeline rank -> global GPU (pipeline_rank_gpu; a pair's first rank's)

  // The recompute levels a stage may take: the workload's own, or with per-stage recompute none, selective
  // and full, lightest first; a stage takes the lightest whose memory fits its GPU (one chunk per rank).
  std::vector<Recompute> levels;
  // Per level and distinct (GPU type, tp link): prefix sums of each layer's F + B + W seconds.
  std::vector<std::vector<std::vector<double>>> level_time_prefix;
  std::vector<int> stage_class;  // stage -> index into level_time_prefix[level]
  // With `phases` (make_partition_problem), per class, at the lightest level (the least any level takes): prefix sums of each layer's F, B and W
  // seconds without the expert all-to-alls, and of those all-to-alls in F and in B. What the bounds on a
  // split's simulated step read (planner/fastest_split.hpp).
  struct PhasePrefix {
    std::vector<double> f, b, w, comm_f, comm_b;
  };
  std::vector<PhasePrefix> phase_prefix;
  double dispatch_s = 0;  // CostModel::action_overhead_s, added to every stage action
  // What the bounds add to W for it: dispatch_s, or 0 where a full backward pays it once for B and W
  // (CostModel::full_backward_one_action), so that W's bound stays below a BW action's share.
  double w_dispatch_s = 0;
  std::vector<double> param_prefix;  // per tp rank
  std::vector<std::vector<double>> level_act_prefix, level_wg_prefix;  // per level
  std::vector<RangeMax> level_working;  // per level: the largest LayerWork::working_bytes over layers
  // Level 0's (the only level unless per-stage recompute): what the several-chunk search reads.
  std::vector<double> act_prefix, wg_prefix;
  std::vector<double> cut;  // bytes crossing the boundary after layer i (i < layers - 1)
  // Boundary s -> s + 1 (s < stages - 1): the activation's link and the gradient's way back; false
  // `remote` when both stages are on one rank (no transfer).
  std::vector<LinkSpec> forward_link, backward_link;
  std::vector<bool> remote;

  double state_per_parameter = 0;
  // A DeepSeek-V3 MTP module on the rank holding the embedding (stage 0's, whatever the split) looks its tokens up
  // there, without a table of its own (core/stage_costs.hpp): per stage whether it is on that rank, and per layer
  // prefix sums of the state those tables take.
  std::vector<char> shares_table;
  std::vector<double> shared_table_prefix;
  std::vector<double> stage_reserve;  // the GPU's fixed reserve, on each rank's first stage
  std::vector<double> rank_limit;     // memory of each rank's GPU (infinity: ideal cluster)
  // Per rank, Pareto-maximal holdings only. This and level_work are shared, not copied, from ProblemOptions
  // when it gives them (the configuration search builds a problem per candidate from tables it keeps for the
  // whole search: copying them was a tenth of the search's instructions); they are then borrowed, and the
  // caller's must outlive the problem.
  std::shared_ptr<const std::vector<std::vector<Holding>>> holdings;
  // Per rank and chunk, the Pareto-maximal (full, partial) pairs of that chunk alone.
  std::vector<std::vector<std::vector<std::pair<int, int>>>> chunk_holdings;
  int max_chunks = 1;
  std::vector<std::shared_ptr<const LayerWorks>> level_work;  // per level, each layer's

  // The level stage s takes with layers [begin, end): the lightest that fits, else the heaviest.
  int level(int s, int begin, int end) const { return levels.size() == 1 ? 0 : lightest_fitting_level(s, begin, end); }
  // Each stage's level under a split, and each layer's work at its stage's level (for stage_costs()).
  std::vector<Recompute> stage_levels(const std::vector<LayerRange>& ranges) const;
  LayerWorks work_for(const std::vector<LayerRange>& ranges) const;

  // Layers [begin, end) on stage s: F + B + W on the stage's GPU plus, except on the last stage, the
  // activation sent to stage s + 1 and its gradient coming back (latency + bytes / bandwidth each).
  // The partitioner's programmes ask these millions of times: defined here, so that their loops inline them.
  double stage_time(int s, int begin, int end) const { return compute_time(s, begin, end) + transfer_time(s, end); }
  double compute_time(int s, int begin, int end) const {  // at the stage's level
    const std::vector<double>& p = level_time_prefix[static_cast<size_t>(level(s, begin, end))]
                                                    [static_cast<size_t>(stage_class[static_cast<size_t>(s)])];
    return p[static_cast<size_t>(end)] - p[static_cast<size_t>(begin)];
  }
  double transfer_time(int s, int end) const {  // of the boundary after layer end - 1
    if (s + 1 >= stages || !remote[static_cast<size_t>(s)]) return 0;
    const double bytes = cut[static_cast<size_t>(end) - 1];
    return one_way(forward_link[static_cast<size_t>(s)], bytes) + one_way(backward_link[static_cast<size_t>(s)], bytes);
  }
  double state_bytes(int s, int begin, int end) const {  // model state + the stage's reserve share
    double bytes = (param_prefix[static_cast<size_t>(end)] - param_prefix[static_cast<size_t>(begin)]) * state_per_parameter +
                   stage_reserve[static_cast<size_t>(s)];
    if (shares_table[static_cast<size_t>(s)])
      bytes -= shared_table_prefix[static_cast<size_t>(end)] - shared_table_prefix[static_cast<size_t>(begin)];
    return bytes;
  }
  // The stage's own most demanding activation holding: exact for a one-chunk rank; with several
  // chunks, a lower bound of what it adds to its rank's peak (at the rank's peak it holds at most this).
  double chunk_peak(int s, int begin, int end) const {  // at the stage's level
    return chunk_peak_at(level(s, begin, end), s, begin, end);
  }
  // At a given level: the most demanding of the chunk's holdings, plus the stage's largest transient on top
  // (as the simulator counts it).
  double chunk_peak_at(int level, int s, int begin, int end) const {
    const std::vector<double>& act = level_act_prefix[static_cast<size_t>(level)];
    const std::vector<double>& wgp = level_wg_prefix[static_cast<size_t>(level)];
    const double a = act[static_cast<size_t>(end)] - act[static_cast<size_t>(begin)];
    const double wg = wgp[static_cast<size_t>(end)] - wgp[static_cast<size_t>(begin)];
    double peak = 0;
    const auto& pairs = chunk_holdings[static_cast<size_t>(stage_rank[static_cast<size_t>(s)])]
                                      [static_cast<size_t>(stage_chunk[static_cast<size_t>(s)])];
    for (const auto& [full, partial] : pairs) peak = std::max(peak, full * a + partial * wg);
    return peak + level_working[static_cast<size_t>(level)].max(static_cast<size_t>(begin), static_cast<size_t>(end));
  }
  // state_bytes + chunk_peak: the rank's exact peak memory for one-chunk ranks.
  double stage_memory(int s, int begin, int end) const { return state_bytes(s, begin, end) + chunk_peak(s, begin, end); }
  // A rank's exact peak (model state + activation peak) under a split; what the simulator reports.
  double rank_memory(int r, const std::vector<LayerRange>& ranges) const;
  // The split's slowest stage_time.
  double bottleneck(const std::vector<LayerRange>& ranges) const;

 private:
  int lightest_fitting_level(int s, int begin, int end) const;
};

// What make_partition_problem may skip or take ready-made.
struct ProblemOptions {
  bool phases = false;  // fill phase_prefix (what only the search by simulated step time reads)
  // activation_holdings(schedule), when the caller keeps them with the schedule (the configuration search
  // meets one schedule in many configurations).
  const std::vector<std::vector<Holding>>* holdings = nullptr;
  // Each layer's work under the scenario's workload (one recompute level), when the caller has it.
  const LayerWorks* work = nullptr;
  // With per-stage recompute: each layer's work at none, selective and full (the levels in that order), where
  // the caller has it (null: made here).
  std::vector<const LayerWorks*> level_work;
};

// `schedule`: the compute-only schedule of the scenario (make_schedule of its spec).
PartitionProblem make_partition_problem(const Scenario& resolved, const CostModel& cost, const Schedule& schedule,
                                        const ProblemOptions& options = {});

// The holdings of every rank at each allocation point of its order (F, or the F of a composite),
// Pareto-maximal only: what bounds the activation peak for every choice of per-chunk sizes.
std::vector<std::vector<Holding>> activation_holdings(const Schedule& schedule);

}  // namespace pw
