#pragma once
// A scenario is everything `simulate` needs: model, cluster, parallel degrees, batch, schedule, split.
// evaluate() checks it, builds the schedule and the stage costs, runs the simulator and derives the
// metrics people read (throughput, MFU, memory per stage). simulate, plan and run share it.
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/model.hpp"
#include "core/stage_costs.hpp"
#include "core/workload.hpp"
#include "schedules/generators.hpp"
#include "sim/pipeline_sim.hpp"

namespace pw {

struct Scenario {
  Model model;
  Cluster cluster;
  ParallelConfig parallel;       // microbatches is derived from global_batch_size when that is set
  Workload workload;             // workload.tp mirrors parallel.tp; seq_len 0 -> the model's
  int global_batch_size = 0;     // sequences per iteration over all replicas; 0: use parallel.microbatches
  std::string schedule = "1f1b";
  // Interleaved micro-batch group size: 0 Megatron's (p), kPyTorchGroupSize PyTorch's automatic one
  // (interleaved_group_size), or the size itself.
  int group_size = 0;
  int max_pending = 0;           // zb-h1/zb-h2: micro-batches awaiting W per rank (0: the schedule's own)
  std::vector<int> split;        // transformer blocks per stage (per chunk with vpp); empty: balanced
  std::vector<LayerRange> ranges;  // exact layer ranges per stage (the planner's); win over `split`
  // With workload.recompute PerStage: each stage's level (none, selective or full). Given alone, it sets
  // workload.recompute to PerStage.
  std::vector<Recompute> stage_recompute;
  // Optimizer post-validation (--no-sync-optimizer): no global barrier before the optimizer step, so the
  // next iteration overlaps this one's tail; `async_iterations` run back to back and the last one is
  // reported (the steady state).
  bool synchronous_optimizer = true;
  int async_iterations = 4;
  // Ranks that compute on one CPU machine's cores, every replica's together (`run --backend cpu`): `cores`
  // is the machine's; each simulated replica takes cores / dp of them. Default: a device per rank.
  SharedCores shared_cores;
  // A schedule read from a file (--schedule-csv) instead of generated from `schedule`: pp must be its
  // rank count and microbatches its micro-batch count. A lowered one keeps its own communication order.
  std::optional<Schedule> imported_schedule;

  // Whether selective recomputation runs anywhere (every stage, or one per-stage level): where
  // workload.recompute_modules apply.
  bool selective_somewhere() const {
    return workload.recompute == Recompute::Selective ||
           std::find(stage_recompute.begin(), stage_recompute.end(), Recompute::Selective) != stage_recompute.end();
  }
};

// Throws BadInput naming the option and the fix: GPUs the cluster cannot hold, tp outside a node or not
// dividing the heads, a global batch that is not a multiple of micro-batch size x dp, m that the schedule
// rejects, more stages than layers. Returns the scenario with derived fields filled in.
Scenario resolve(const Scenario& s);
// BadInput naming `option` when a GPU of the cluster has no fp8 peak (an A100: no fp8 tensor cores);
// `fix` ends the message.
void check_fp8_supported(const Cluster& cluster, std::string_view option, std::string_view fix);
// BadInput naming --precision-aware-optimizer when `pc` runs it without the distributed optimizer (ZeRO-0),
// which Megatron-Core refuses (megatron/core/optimizer/__init__.py). resolve() checks it.
void check_optimizer_precision(const ParallelConfig& pc);

struct StageReport {
  int stage = 0;
  int rank = 0;
  LayerRange layers;
  StageCost cost;
};

struct Overflow {
  int rank = 0;
  double need_bytes = 0;
  double limit_bytes = 0;
};

struct Metrics {
  double step_time_s = 0;
  double bubble_fraction = 0;       // pipeline idle time, the exposed dp communication not counted
  double exposed_dp_comm_s = 0;     // data-parallel reduction left after the last compute
  // Expert parallelism's all-to-alls (and etp collectives) per step on the rank that spends the most in them:
  // every micro-batch's dispatch and combine in F and B of its MoE layers. An F&B composite hides some.
  double expert_all_to_all_s = 0;
  // Per step, on the rank where it is most, the time its GPU waits for the host to issue MoE blocks
  // (StageCost::host_wait_s: every micro-batch's phases that the host issues slower than the GPU runs them).
  double host_wait_s = 0;
  double tokens_per_iteration = 0;
  double throughput_tokens_per_s = 0;
  double model_flops_per_iteration = 0;     // all GPUs, no recomputation
  double hardware_flops_per_iteration = 0;  // recomputation counted
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  double peak_memory_bytes = 0;  // worst rank
  double memory_limit_bytes = 0;
  std::vector<Overflow> overflows;  // ranks whose peak exceeds the GPU memory
};

struct Evaluation {
  Scenario scenario;  // resolved
  // The data-parallel replica reported: the slowest. Replicas differ only on clusters that mix GPU types or
  // links (each distinct one is simulated; they all wait for the slowest at the gradient reduction).
  int replica = 0;
  Schedule schedule;  // compute-only, as generated (or imported, without its communication)
  std::vector<StageReport> stages;
  SimResult sim;
  Metrics metrics;
};

// The global GPU index of pipeline rank r's first tp rank in data-parallel replica `replica`, under the
// configuration's rank order.
int pipeline_rank_gpu(const ParallelConfig& pc, int rank, int replica = 0);

// The model's parts an evaluation ran: its stages' layers, one copy's with copies of the model (the inverse of
// stage_ranges; what --split gives).
std::vector<LayerRange> model_parts(const Evaluation& ev);

// `schedule`: make_schedule(schedule_spec(resolve(s))) when the caller has it (the configuration search keeps
// every schedule it generated; generating a V schedule again costs more than simulating it).
Evaluation evaluate(const Scenario& s, const CostModel& cost, SimObserver* observer = nullptr,
                    const Schedule* schedule = nullptr);

// What the generator builds a resolved scenario's schedule from: its name, pp, chunks, micro-batches, group
// size and pending limit (without zb-auto's stage costs).
ScheduleSpec schedule_spec(const Scenario& resolved);
// Copies of the model the scenario's schedule runs: the imported schedule's, or its generator's (model_copies).
int schedule_copies(const Scenario& s);

// Each stage's layers: the model's parts, one a stage with one copy of the model, each copy's stages running
// them in turn with more (Schedule::part_of_stage).
std::vector<LayerRange> stage_ranges(const Schedule& schedule, const std::vector<LayerRange>& parts);

// Scenario::group_size for PyTorch's rule (torch/distributed/pipelining/schedules.py, Interleaved1F1B at
// 1f1416a3): number_of_rounds = max(1, m // pp), microbatches_per_round = m // number_of_rounds, and m a
// multiple of the rounds (ValueError otherwise).
inline constexpr int kPyTorchGroupSize = -1;
// The group the interleaved schedule of `s` runs: group_size, p for 0, PyTorch's for kPyTorchGroupSize
// (BadInput naming --microbatches when PyTorch refuses m).
int interleaved_group_size(const Scenario& s);

// The compute-only schedule evaluate() simulates for a resolved scenario with these stage costs: the
// imported one, or the generated one; zb-auto's order is searched on the costs (stage times, the link
// time of each stage's output, the activation sets that fit next to the model state), and without
// costs it is zb-auto's order for uniform stages. The placement never depends on the costs.
Schedule evaluated_schedule(const Scenario& resolved, const std::vector<StageCost>& costs, const CostModel& cost);

}  // namespace pw
