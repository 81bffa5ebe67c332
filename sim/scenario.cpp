#include "sim/scenario.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/layer_work.hpp"
#include "core/units.hpp"

namespace pw {
namespace {

void check_positive(int value, const char* option) {
  if (value < 1) throw_bad_input("{}: must be at least 1, got {}", option, value);
}

}  // namespace

int pipeline_rank_gpu(const ParallelConfig& pc, int rank) { return rank * pc.tp; }

namespace {

// zb-auto's inputs from the stage costs: F, B and W per stage; per boundary the time the stage's output
// takes over the link between the two ranks; per stage the activation sets that fit next to the model
// state in the GPU's memory (at most 2p: ZB-H2's level, beyond which the paper finds no gain), and the
// part of them held until W.
ScheduleSpec zb_auto_spec(ScheduleSpec spec, const Scenario& s, const std::vector<StageCost>& costs,
                          const CostModel& cost) {
  const ParallelConfig& pc = s.parallel;
  const double most = 2.0 * pc.pp;
  for (int r = 0; r < pc.pp; ++r) {
    const StageCost& c = costs[static_cast<size_t>(r)];
    spec.stage_f.push_back(c.forward_s);
    spec.stage_b.push_back(c.backward_input_s);
    spec.stage_w.push_back(c.backward_weight_s);
    const double limit = s.cluster.memory_limit_at(pipeline_rank_gpu(pc, r));
    const double fits = c.activation_bytes > 0 && std::isfinite(limit)
                            ? std::floor((limit - c.model_state_bytes) / c.activation_bytes)
                            : most;
    spec.memory_limit_microbatches.push_back(std::clamp(fits, 1.0, most));
    spec.stage_w_held.push_back(c.activation_bytes > 0 ? c.weight_grad_bytes / c.activation_bytes : 1.0);
    if (r + 1 == pc.pp) continue;
    double comm = 0;
    if (!s.cluster.ideal) {
      const LinkSpec link =
          cost.p2p_link(s.cluster.link(pipeline_rank_gpu(pc, r), pipeline_rank_gpu(pc, r + 1)));
      comm = link.latency_s + c.output_bytes / link.bandwidth_bytes_per_s;
    }
    spec.comm_s.push_back(comm);
  }
  return spec;
}

}  // namespace

Schedule evaluated_schedule(const Scenario& s, const std::vector<StageCost>& costs, const CostModel& cost) {
  if (s.imported_schedule) return strip_comm(*s.imported_schedule);
  ScheduleSpec spec;
  spec.name = s.schedule;
  spec.ranks = s.parallel.pp;
  spec.microbatches = s.parallel.microbatches;
  spec.chunks = chunks_per_rank(s.schedule, s.parallel.vpp);
  spec.group_size = s.group_size;
  spec.max_pending = s.max_pending;
  if (order_from_costs(s.schedule) && !costs.empty()) spec = zb_auto_spec(spec, s, costs, cost);
  return make_schedule(spec);
}

Scenario resolve(const Scenario& in) {
  Scenario s = in;
  ParallelConfig& pc = s.parallel;
  check_positive(pc.tp, "--tp");
  check_positive(pc.pp, "--pp");
  check_positive(pc.dp, "--dp");
  check_positive(pc.vpp, "--vpp");
  check_positive(s.workload.micro_batch_size, "--micro-batch-size");
  if (s.workload.seq_len < 0) throw_bad_input("--seq-len: must be positive, got {}", s.workload.seq_len);
  if (s.workload.seq_len == 0) s.workload.seq_len = s.model.default_seq_len();
  if (s.workload.seq_len <= 0)
    s.workload.seq_len = 1;  // explicit-cost models: times are given per micro-batch, the length only labels tokens
  s.workload.tp = pc.tp;
  if (pc.tp == 1) s.workload.sequence_parallel = false;

  if (!s.cluster.ideal && pc.tp > s.cluster.gpus_per_node)
    throw_bad_input("--tp: {} exceeds the {} GPUs of a node in cluster '{}'; tensor parallelism stays inside a node, use --tp {} or less",
                    pc.tp, s.cluster.gpus_per_node, s.cluster.name, s.cluster.gpus_per_node);
  if (s.model.transformer) {
    const TransformerConfig& t = *s.model.transformer;
    if (t.heads % pc.tp != 0)
      throw_bad_input("--tp: {} does not divide the {} attention heads of '{}'; use a divisor of {}", pc.tp, t.heads,
                      s.model.name, t.heads);
    if (t.kv_heads % pc.tp != 0 && pc.tp % t.kv_heads != 0)
      throw_bad_input("--tp: {} and the {} key/value heads of '{}' do not divide one another; use a divisor or multiple of {}",
                      pc.tp, t.kv_heads, s.model.name, t.kv_heads);
  } else if (pc.tp > 1) {
    throw_bad_input("--tp: model '{}' gives explicit per-layer costs, which already include any tensor parallelism; use --tp 1",
                    s.model.name);
  }
  s.cluster.check_capacity(pc.gpus());

  if (s.global_batch_size > 0) {
    const int per_step = s.workload.micro_batch_size * pc.dp;
    if (s.global_batch_size % per_step != 0)
      throw_bad_input("--global-batch-size: {} is not a multiple of micro-batch size x dp = {} x {} = {}; use {} or {}",
                      s.global_batch_size, s.workload.micro_batch_size, pc.dp, per_step,
                      std::max(per_step, s.global_batch_size / per_step * per_step),
                      (s.global_batch_size / per_step + 1) * per_step);
    const int m = s.global_batch_size / per_step;
    if (in.parallel.microbatches > 1 && in.parallel.microbatches != m)
      throw_bad_input("--microbatches: {} disagrees with --global-batch-size {} / (micro-batch size {} x dp {}) = {}; give one of them",
                      in.parallel.microbatches, s.global_batch_size, s.workload.micro_batch_size, pc.dp, m);
    pc.microbatches = m;
  }
  check_positive(pc.microbatches, "--microbatches");
  s.global_batch_size = pc.microbatches * s.workload.micro_batch_size * pc.dp;

  if (s.async_iterations < 2)
    throw_bad_input("async iterations: {} back to back is too few for a steady state; use 2 or more",
                    s.async_iterations);
  int stages = 0;
  if (s.imported_schedule) {
    const Schedule& imported = *s.imported_schedule;
    if (imported.num_ranks() != pc.pp)
      throw_bad_input("--pp: {} but schedule {} has {} ranks (rows); use --pp {}", pc.pp, imported.name,
                      imported.num_ranks(), imported.num_ranks());
    if (imported.microbatches != pc.microbatches)
      throw_bad_input("--microbatches: {} but schedule {} has {} micro-batches; use --microbatches {}", pc.microbatches,
                      imported.name, imported.microbatches, imported.microbatches);
    s.schedule = imported.name;
    stages = imported.num_stages();
    if (pc.vpp > 1 && pc.vpp * pc.pp != stages)
      throw_bad_input("--vpp: {} but schedule {} has {} stages on {} ranks; omit --vpp", pc.vpp, imported.name, stages,
                      pc.pp);
  } else {
    const int chunks = chunks_per_rank(s.schedule, pc.vpp);
    if (chunks == 1 && pc.vpp > 1)
      throw_bad_input("--vpp: schedule '{}' runs one model chunk per rank; use --vpp 1 or --schedule interleaved",
                      s.schedule);
    stages = pc.pp * chunks;
  }
  if (stages > s.model.num_layers())
    throw_bad_input("--pp x --vpp = {} stages but model '{}' has only {} layers; use fewer stages", stages, s.model.name,
                    s.model.num_layers());
  if (!s.ranges.empty()) {
    if (static_cast<int>(s.ranges.size()) != stages)
      throw_bad_input("layer ranges: {} ranges for {} stages; give one range per stage", s.ranges.size(), stages);
    int next = 0;
    for (size_t i = 0; i < s.ranges.size(); ++i) {
      if (s.ranges[i].first != next || s.ranges[i].last < s.ranges[i].first)
        throw_bad_input("layer ranges: stage {} holds layers {}..{} but must start at layer {} and hold at least one; "
                        "give contiguous ranges covering every layer",
                        i, s.ranges[i].first, s.ranges[i].last, next);
      next = s.ranges[i].last + 1;
    }
    if (next != s.model.num_layers())
      throw_bad_input("layer ranges: they end at layer {} but model '{}' has {} layers; give ranges covering every layer",
                      next - 1, s.model.name, s.model.num_layers());
  }
  return s;
}

Evaluation evaluate(const Scenario& input, const CostModel& cost, SimObserver* observer) {
  Evaluation ev;
  ev.scenario = resolve(input);
  const Scenario& s = ev.scenario;
  const ParallelConfig& pc = s.parallel;

  // The placement, which the stage costs need, never depends on the costs.
  ev.schedule = evaluated_schedule(s, {}, cost);
  const int stages = ev.schedule.num_stages();

  const std::vector<LayerRange> ranges =
      !s.ranges.empty() ? s.ranges
                        : split_layers(s.model, stages, s.split,
                   s.split.empty() ? layer_step_costs(s.model, s.workload, pc, s.cluster, cost) : std::vector<double>{});
  std::vector<int> stage_gpu(static_cast<size_t>(stages));
  for (int st = 0; st < stages; ++st) stage_gpu[st] = pipeline_rank_gpu(pc, ev.schedule.placement.rank_of(st));
  const std::vector<StageCost> costs = stage_costs(s.model, ranges, s.workload, pc, s.cluster, cost, stage_gpu);
  if (!s.imported_schedule && order_from_costs(s.schedule)) ev.schedule = evaluated_schedule(s, costs, cost);

  SimInput in;
  in.schedule = s.imported_schedule ? *s.imported_schedule : ev.schedule;
  in.synchronous_optimizer = s.synchronous_optimizer;
  in.iterations = s.synchronous_optimizer ? 1 : s.async_iterations;
  in.stages = costs;
  in.rank_gpu.resize(static_cast<size_t>(pc.pp));
  for (int r = 0; r < pc.pp; ++r) in.rank_gpu[r] = pipeline_rank_gpu(pc, r);
  in.cluster = s.cluster;
  in.cost = &cost;
  ev.sim = simulate(in, observer);

  for (int st = 0; st < stages; ++st)
    ev.stages.push_back(StageReport{st, ev.schedule.placement.rank_of(st), ranges[st], costs[st]});

  Metrics& m = ev.metrics;
  m.step_time_s = ev.sim.step_time_s;
  m.bubble_fraction = ev.sim.bubble_fraction;
  m.tokens_per_iteration = static_cast<double>(s.global_batch_size) * s.workload.seq_len;
  const double gpus = pc.gpus();
  if (s.model.transformer) {
    Workload whole = s.workload;
    whole.tp = 1;
    whole.sequence_parallel = false;
    const double sequences = s.global_batch_size / static_cast<double>(s.workload.micro_batch_size);
    m.model_flops_per_iteration = model_flops_per_microbatch(s.model, whole) * sequences;
    m.hardware_flops_per_iteration = hardware_flops_per_microbatch(s.model, whole) * sequences;
  }
  if (m.step_time_s > 0) {
    m.throughput_tokens_per_s = m.tokens_per_iteration / m.step_time_s;
    m.model_tflops_per_gpu = m.model_flops_per_iteration / m.step_time_s / gpus / 1e12;
    m.hardware_tflops_per_gpu = m.hardware_flops_per_iteration / m.step_time_s / gpus / 1e12;
    // Mixed clusters: utilisation is against the mean peak of the GPUs in use (every replica repeats
    // the pipeline's GPU types).
    double peak = 0;
    for (int r = 0; r < pc.pp; ++r) peak += s.cluster.gpu_at(pipeline_rank_gpu(pc, r)).peak_flops;
    peak /= pc.pp;
    m.mfu = m.model_tflops_per_gpu * 1e12 / peak;
    m.hfu = m.hardware_tflops_per_gpu * 1e12 / peak;
  }
  m.memory_limit_bytes = s.cluster.memory_limit();
  for (const RankStats& r : ev.sim.ranks) {
    m.peak_memory_bytes = std::max(m.peak_memory_bytes, r.peak_memory_bytes);
    const double limit = s.cluster.memory_limit_at(pipeline_rank_gpu(pc, r.rank));
    if (r.peak_memory_bytes > limit) m.overflows.push_back(Overflow{r.rank, r.peak_memory_bytes, limit});
  }
  return ev;
}

}  // namespace pw
