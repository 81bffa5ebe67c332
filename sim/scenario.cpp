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

  const int chunks = chunks_per_rank(s.schedule, pc.vpp);
  if (chunks == 1 && pc.vpp > 1)
    throw_bad_input("--vpp: schedule '{}' runs one model chunk per rank; use --vpp 1 or --schedule interleaved", s.schedule);
  const int stages = pc.pp * chunks;
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

  ScheduleSpec spec;
  spec.name = s.schedule;
  spec.ranks = pc.pp;
  spec.microbatches = pc.microbatches;
  spec.chunks = chunks_per_rank(s.schedule, pc.vpp);
  spec.group_size = s.group_size;
  ev.schedule = make_schedule(spec);
  const int stages = ev.schedule.num_stages();

  const std::vector<LayerRange> ranges =
      !s.ranges.empty() ? s.ranges
                        : split_layers(s.model, stages, s.split,
                   s.split.empty() ? layer_step_costs(s.model, s.workload, pc, s.cluster, cost) : std::vector<double>{});
  std::vector<int> stage_gpu(static_cast<size_t>(stages));
  for (int st = 0; st < stages; ++st) stage_gpu[st] = pipeline_rank_gpu(pc, ev.schedule.placement.rank_of(st));
  const std::vector<StageCost> costs = stage_costs(s.model, ranges, s.workload, pc, s.cluster, cost, stage_gpu);

  SimInput in;
  in.schedule = ev.schedule;
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
