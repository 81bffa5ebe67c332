#include "sim/scenario.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <tuple>

#include "core/checked_math.hpp"
#include "core/error.hpp"
#include "core/expert_parallel.hpp"
#include "core/layer_work.hpp"
#include "core/units.hpp"

namespace pw {
namespace {

void check_positive(int value, const char* option) {
  if (value < 1) throw_bad_input("{}: must be at least 1, got {}", option, value);
}

// Context parallelism as Megatron runs it (Transformer Engine's ring attention, causal sequences split in
// 2 x cp chunks, each rank taking a head and a tail chunk: megatron/training/arguments.py asserts
// seq_length % (2 x context_parallel_size) == 0).
void check_context_parallel(const Scenario& s) {
  const int cp = s.parallel.cp;
  if (!s.model.transformer)
    throw_bad_input("--cp: model '{}' gives explicit per-layer costs for whole sequences; use --cp 1", s.model.name);
  const long chunks = 2L * cp;  // in a long: --cp 2147483647 doubled is no int
  if (s.workload.seq_len % chunks != 0)
    throw_bad_input("--cp: {} splits each sequence into 2 x {} = {} chunks, which do not divide --seq-len {}; use a "
                    "sequence length that is a multiple of {}",
                    cp, cp, chunks, s.workload.seq_len, chunks);
  if (!s.workload.flash_attention)
    throw_bad_input("--cp: context parallelism runs on fused attention (Transformer Engine's ring attention); drop "
                    "--no-flash-attention or use --cp 1");
  if (s.model.transformer->attention_window > 0)
    throw_bad_input("--cp: '{}' attends over a sliding window of {} tokens, which the cp ring does not model; use --cp 1",
                    s.model.name, s.model.transformer->attention_window);
  if (s.workload.sequence_parallel && s.parallel.tp > 1 && s.workload.seq_len / cp % s.parallel.tp != 0)
    throw_bad_input("--cp: each cp rank's {} tokens do not split over --tp {} for sequence parallelism; use a --seq-len "
                    "that is a multiple of {}",
                    s.workload.seq_len / cp, s.parallel.tp, cp * std::lcm(2, s.parallel.tp));
}

}  // namespace

int pipeline_rank_gpu(const ParallelConfig& pc, int rank, int replica) { return global_rank(pc, pc.order, 0, rank, replica); }

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
                            ? std::floor((limit - c.model_state_bytes - c.working_bytes) / c.activation_bytes)
                            : most;
    spec.memory_limit_microbatches.push_back(std::clamp(fits, 1.0, most));
    // Of the F activations, the part a pending W still holds (all of it when B keeps more than F did).
    spec.stage_w_held.push_back(c.activation_bytes > 0 ? std::min(1.0, c.weight_grad_bytes / c.activation_bytes) : 1.0);
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

int schedule_copies(const Scenario& s) {
  return s.imported_schedule ? s.imported_schedule->copies : model_copies(s.schedule);
}

std::vector<LayerRange> model_parts(const Evaluation& ev) {
  std::vector<LayerRange> out;
  for (int st = 0; st < ev.schedule.stages_per_copy(); ++st) out.push_back(ev.stages[static_cast<size_t>(st)].layers);
  return out;
}

std::vector<LayerRange> stage_ranges(const Schedule& schedule, const std::vector<LayerRange>& parts) {
  std::vector<LayerRange> out;
  for (int st = 0; st < schedule.num_stages(); ++st) out.push_back(parts.at(static_cast<size_t>(schedule.part_of_stage(st))));
  return out;
}

ScheduleSpec schedule_spec(const Scenario& s) {
  ScheduleSpec spec;
  spec.name = s.schedule;
  spec.ranks = s.parallel.pp;
  spec.microbatches = s.parallel.microbatches;
  spec.chunks = chunks_per_rank(s.schedule, s.parallel.vpp);
  spec.group_size = s.group_size == kPyTorchGroupSize && s.schedule == "interleaved" ? interleaved_group_size(s)
                                                                                     : std::max(s.group_size, 0);
  spec.max_pending = s.max_pending;
  return spec;
}

int interleaved_group_size(const Scenario& s) {
  const int p = s.parallel.pp, m = s.parallel.microbatches;
  if (s.group_size > 0) return s.group_size;
  if (s.group_size == 0 || p < 1 || m < 1) return p;
  const int rounds = std::max(1, m / p);
  if (m % rounds != 0)
    throw_bad_input("--microbatches: PyTorch's Interleaved1F1B runs {} micro-batches in {} rounds of pp {}, which "
                    "needs a multiple of {}; use {} or {}",
                    m, rounds, p, rounds, m - m % rounds, m - m % rounds + rounds);
  return m / rounds;
}

Schedule evaluated_schedule(const Scenario& s, const std::vector<StageCost>& costs, const CostModel& cost) {
  if (s.imported_schedule) return strip_comm(*s.imported_schedule);
  ScheduleSpec spec = schedule_spec(s);
  if (order_from_costs(s.schedule) && !costs.empty()) spec = zb_auto_spec(spec, s, costs, cost);
  return make_schedule(spec);
}

// Megatron's own rule (transformer_config.py): mla_up_proj "is only supported with multi_latent_attention".
void check_recompute_modules(const Scenario& s) {
  if (!s.workload.recompute_modules.has(RecomputeModule::MlaUpProj)) return;
  if (!s.model.transformer || !s.model.transformer->mla)
    throw_bad_input("--recompute-modules: mla_up_proj reruns multi-head latent attention's up projections, which '{}' "
                    "does not have; leave mla_up_proj out",
                    s.model.name);
}

// Megatron-Core raises "only supported with distributed optimizer".
void check_optimizer_precision(const ParallelConfig& pc) {
  if (pc.optimizer_precision.precision_aware && pc.zero == 0)
    throw_bad_input("--precision-aware-optimizer: Megatron-Core runs it only with the distributed optimizer; give "
                    "--zero 1 (the default) or more, or leave it out");
}

void check_fp8_supported(const Cluster& cluster, std::string_view option, std::string_view fix) {
  std::vector<GpuSpec> gpus{cluster.gpu};
  for (const NodeGroup& g : cluster.node_groups) gpus.push_back(g.gpu);
  for (const GpuSpec& g : gpus)
    if (!(g.fp8_peak_flops > 0))
      throw_bad_input("{}: fp8 needs the GPU's dense fp8 peak; '{}' of cluster '{}' has none (no fp8 tensor cores, or "
                      "fp8_peak_tflops not given); {}",
                      option, g.name, cluster.name, fix);
}

Scenario resolve(const Scenario& in) {
  Scenario s = in;
  ParallelConfig& pc = s.parallel;
  check_positive(pc.tp, "--tp");
  check_positive(pc.cp, "--cp");
  check_positive(pc.pp, "--pp");
  check_positive(pc.dp, "--dp");
  check_positive(pc.vpp, "--vpp");
  if (pc.dp_shard < 0 || (pc.dp_shard > 0 && pc.dp % pc.dp_shard != 0))
    throw_bad_input("--dp-shard: {} does not divide --dp {}; give a divisor of {} (the dp ranks of one shard group)",
                    pc.dp_shard, pc.dp, pc.dp);
  if (pc.dp_shard > 0 && pc.dp_shard < pc.dp && pc.zero == 0)
    throw_bad_input("--dp-shard: ZeRO-0 shards nothing to replicate; give --zero 1, 2 or 3 with --dp-shard {}", pc.dp_shard);
  if (pc.dp_shard == pc.dp) pc.dp_shard = 0;
  check_optimizer_precision(pc);
  check_positive(s.workload.micro_batch_size, "--micro-batch-size");
  if (s.workload.seq_len < 0) throw_bad_input("--seq-len: must be positive, got {}", s.workload.seq_len);
  if (s.workload.seq_len == 0) s.workload.seq_len = s.model.default_seq_len();
  if (s.workload.seq_len <= 0)
    s.workload.seq_len = 1;  // explicit-cost models: times are given per micro-batch, the length only labels tokens
  s.workload.tp = pc.tp;
  s.workload.cp = pc.cp;
  s.workload.ep = pc.ep;
  s.workload.etp = pc.etp;
  if (pc.cp > 1) check_context_parallel(s);
  if (s.workload.precision == Precision::Fp8) check_fp8_supported(s.cluster, "--precision", "use --precision bf16 or such a GPU (H100, H200, B200)");
  if (pc.tp == 1) s.workload.sequence_parallel = false;
  check_expert_parallel(s.model, pc, s.workload);
  check_recompute_modules(s);
  // TransformerConfig.__post_init__: "Storing activation input in FP8 is supported only for SwiGLU."
  if (s.workload.activation_fp8_input_store && (!s.model.transformer || s.model.transformer->mlp != MlpKind::SwiGlu))
    throw_bad_input("--activation-func-fp8-input-store: Megatron-Core keeps only a SwiGLU's input in fp8, and model "
                    "'{}' has {}; leave it out",
                    s.model.name, s.model.transformer ? "another MLP" : "explicit layer costs");

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
    const std::int64_t G = s.global_batch_size;
    const std::optional<std::int64_t> per_step = checked_product({s.workload.micro_batch_size, pc.dp});
    if (!per_step || *per_step > G)
      throw_bad_input("--global-batch-size: {} is less than micro-batch size x dp = {} x {}; lower --micro-batch-size "
                      "or --dp, or raise --global-batch-size",
                      G, s.workload.micro_batch_size, pc.dp);
    if (G % *per_step != 0)
      throw_bad_input("--global-batch-size: {} is not a multiple of micro-batch size x dp = {} x {} = {}; use {} or {}",
                      G, s.workload.micro_batch_size, pc.dp, *per_step, G / *per_step * *per_step,
                      (G / *per_step + 1) * *per_step);
    const int m = static_cast<int>(G / *per_step);
    if (in.parallel.microbatches > 1 && in.parallel.microbatches != m)
      throw_bad_input("--microbatches: {} disagrees with --global-batch-size {} / (micro-batch size {} x dp {}) = {}; give one of them",
                      in.parallel.microbatches, s.global_batch_size, s.workload.micro_batch_size, pc.dp, m);
    pc.microbatches = m;
  }
  check_positive(pc.microbatches, "--microbatches");
  s.global_batch_size = static_cast<int>(bounded_product({pc.microbatches, s.workload.micro_batch_size, pc.dp},
                                                         std::numeric_limits<int>::max(),
                                                         "global batch --microbatches x --micro-batch-size x --dp",
                                                         "lower --microbatches or --dp"));

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
  // Each copy of the model (bidirectional DualPipe) splits it into the same parts.
  const int copies = schedule_copies(s);
  const int parts = stages / copies;
  if (parts > s.model.num_layers()) {
    if (copies > 1)
      throw_bad_input("--pp: {} splits each of schedule {}'s {} copies of model '{}' into {} stages, but it has only {} "
                      "layers; use fewer stages",
                      pc.pp, s.schedule, copies, s.model.name, parts, s.model.num_layers());
    throw_bad_input("--pp x --vpp = {} stages but model '{}' has only {} layers; use fewer stages", stages, s.model.name,
                    s.model.num_layers());
  }
  if (!s.stage_recompute.empty() && copies > 1)
    throw_bad_input("--stage-recompute: schedule {} runs {} copies of each stage; give one --recompute level for all",
                    s.schedule, copies);
  if (!s.stage_recompute.empty()) {
    if (static_cast<int>(s.stage_recompute.size()) != stages)
      throw_bad_input("--stage-recompute: {} levels for {} stages; give one level per stage (none, selective or full)",
                      s.stage_recompute.size(), stages);
    for (Recompute r : s.stage_recompute)
      if (r == Recompute::PerStage)
        throw_bad_input("--stage-recompute: a stage's level is none, selective or full, not per-stage");
    if (!s.model.transformer)
      throw_bad_input("--stage-recompute: model '{}' gives explicit per-layer costs, which fix their own memory; omit it",
                      s.model.name);
    s.workload.recompute = Recompute::PerStage;
  }
  if (!s.ranges.empty()) {
    if (static_cast<int>(s.ranges.size()) != parts)
      throw_bad_input("layer ranges: {} ranges for {} stages; give one range per stage{}", s.ranges.size(), parts,
                      copies > 1 ? " of one copy of the model" : "");
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

namespace {

// What sets a replica's simulation apart from another's: each pipeline rank's GPU type, tp and cp links,
// and the link to the next rank. On a uniform cluster every replica has the same.
using ReplicaKey = std::vector<std::tuple<std::string, double, double, double, double, double, double, double, double, double>>;

ReplicaKey replica_key(const Scenario& s, int replica) {
  const ParallelConfig& pc = s.parallel;
  ReplicaKey key;
  for (int r = 0; r < pc.pp; ++r) {
    const int g = pipeline_rank_gpu(pc, r, replica);
    const GpuSpec& gpu = s.cluster.gpu_at(g);
    const GroupLinks links = group_links(s.cluster, pc, g);
    const LinkSpec next = r + 1 < pc.pp ? s.cluster.link(g, pipeline_rank_gpu(pc, r + 1, replica)) : LinkSpec{0, 0};
    key.emplace_back(gpu.name, gpu.peak_flops, gpu.memory_bytes, links.tp.bandwidth_bytes_per_s, links.tp.latency_s,
                     links.cp.bandwidth_bytes_per_s, links.cp.latency_s, next.bandwidth_bytes_per_s, next.latency_s,
                     s.cluster.memory_limit_at(g));
  }
  return key;
}

// How many replicas, from the first, hold every kind. On a cluster of one GPU type, moving a replica by
// gpus_per_node replicas moves each of its GPUs by whole nodes, which keeps its GPUs and links, except
// where the measured link matrix reaches: past it, the kinds repeat every gpus_per_node replicas.
int replicas_to_compare(const Scenario& s) {
  const ParallelConfig& pc = s.parallel;
  if (!s.cluster.node_groups.empty()) return pc.dp;
  // A replica's lowest GPU is its index times this.
  const std::int64_t step = dp_stride(pc);
  const std::int64_t measured = s.cluster.measured ? s.cluster.measured->gpus : 0;
  const std::int64_t past_measured = (measured + step - 1) / step;
  return static_cast<int>(std::min<std::int64_t>(pc.dp, past_measured + s.cluster.gpus_per_node));
}

// The replicas whose simulations can differ, first of each kind. Every replica's dp ring is the same
// ring, so its link does not tell them apart.
std::vector<int> distinct_replicas(const Scenario& s) {
  std::vector<int> out{0};
  if (s.cluster.ideal || s.parallel.dp == 1) return out;
  std::vector<ReplicaKey> seen{replica_key(s, 0)};
  const int compared = replicas_to_compare(s);
  for (int d = 1; d < compared; ++d) {
    ReplicaKey k = replica_key(s, d);
    if (std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
    seen.push_back(std::move(k));
    out.push_back(d);
  }
  return out;
}

struct ReplicaRun {
  int replica = 0;
  Schedule schedule;
  std::vector<StageCost> costs;
  SimResult sim;
};

ReplicaRun simulate_replica(const Scenario& s, const Schedule& placement_schedule, const std::vector<LayerRange>& ranges,
                            const LayerWorks& work, const CostModel& cost, int replica, SimObserver* observer) {
  const ParallelConfig& pc = s.parallel;
  ReplicaRun run;
  run.replica = replica;
  run.schedule = placement_schedule;
  const int stages = placement_schedule.num_stages();
  std::vector<int> stage_gpu(static_cast<size_t>(stages));
  for (int st = 0; st < stages; ++st) stage_gpu[st] = pipeline_rank_gpu(pc, placement_schedule.placement.rank_of(st), replica);
  run.costs = stage_costs(s.model, work, ranges, pc, s.cluster, cost, stage_gpu, placement_schedule.copies);
  if (!s.imported_schedule && order_from_costs(s.schedule)) run.schedule = evaluated_schedule(s, run.costs, cost);

  SimInput in;
  in.schedule = s.imported_schedule ? *s.imported_schedule : run.schedule;
  in.synchronous_optimizer = s.synchronous_optimizer;
  in.iterations = s.synchronous_optimizer ? 1 : s.async_iterations;
  in.stages = run.costs;
  in.rank_gpu.resize(static_cast<size_t>(pc.pp));
  for (int r = 0; r < pc.pp; ++r) in.rank_gpu[r] = pipeline_rank_gpu(pc, r, replica);
  in.cluster = s.cluster;
  in.cost = &cost;
  in.shared_cores = s.shared_cores;
  in.shared_cores.cores /= pc.dp;
  run.sim = simulate(in, observer);
  return run;
}

}  // namespace

Evaluation evaluate(const Scenario& input, const CostModel& cost, SimObserver* observer, const Schedule* schedule) {
  Evaluation ev;
  ev.scenario = resolve(input);
  const Scenario& s = ev.scenario;
  const ParallelConfig& pc = s.parallel;
  if (s.workload.recompute == Recompute::PerStage && s.stage_recompute.empty())
    throw_bad_input("--recompute per-stage: give each stage's level with --stage-recompute (pipewright plan chooses them)");

  // The placement, which the stage costs need, never depends on the costs.
  std::optional<Schedule> own;  // the caller's schedule is read in place
  const Schedule& placement_schedule =
      schedule && !s.imported_schedule ? *schedule : own.emplace(evaluated_schedule(s, {}, cost));
  const int stages = placement_schedule.num_stages();

  // The model's parts: every stage with one copy of the model, each copy's stages with more.
  std::vector<LayerRange> ranges = s.ranges;
  if (ranges.empty()) {
    // Balanced on the heaviest level any stage uses: the split must exist before the levels apply.
    Workload balance = s.workload;
    if (!s.stage_recompute.empty()) balance.recompute = *std::max_element(s.stage_recompute.begin(), s.stage_recompute.end());
    ranges = split_layers(s.model, placement_schedule.stages_per_copy(), s.split,
                          s.split.empty() ? layer_step_costs(s.model, balance, pc, s.cluster, cost) : std::vector<double>{});
  }
  const LayerWorks work = staged_layer_work(s.model, s.workload, ranges, s.stage_recompute);
  const std::vector<LayerRange> stage_ranges = pw::stage_ranges(placement_schedule, ranges);

  // Every distinct replica is simulated and the slowest reported; the observer sees only that one.
  const std::vector<int> replicas = distinct_replicas(s);
  std::optional<ReplicaRun> slowest;
  std::vector<Overflow> overflows;
  for (int d : replicas) {
    ReplicaRun run =
        simulate_replica(s, placement_schedule, stage_ranges, work, cost, d, replicas.size() == 1 ? observer : nullptr);
    for (const RankStats& r : run.sim.ranks) {
      const double limit = s.cluster.memory_limit_at(pipeline_rank_gpu(pc, r.rank, d));
      if (r.peak_memory_bytes > limit) overflows.push_back(Overflow{r.rank, r.peak_memory_bytes, limit});
    }
    if (!slowest || run.sim.step_time_s > slowest->sim.step_time_s) slowest = std::move(run);
  }
  if (replicas.size() > 1 && observer)
    slowest = simulate_replica(s, placement_schedule, stage_ranges, work, cost, slowest->replica, observer);
  ev.replica = slowest->replica;
  ev.schedule = std::move(slowest->schedule);
  ev.sim = std::move(slowest->sim);
  for (int st = 0; st < stages; ++st)
    ev.stages.push_back(StageReport{st, ev.schedule.placement.rank_of(st), stage_ranges[st], slowest->costs[st]});

  Metrics& m = ev.metrics;
  m.step_time_s = ev.sim.step_time_s;
  m.bubble_fraction = ev.sim.bubble_fraction;
  m.exposed_dp_comm_s = ev.sim.exposed_dp_comm_s;
  // Per step, on the rank where it is most: `per_microbatch` of each stage the rank holds, for every micro-batch
  // that runs on it (its copy's share).
  const auto busiest_rank = [&](double (*per_microbatch)(const StageCost&)) {
    std::vector<double> per_rank(static_cast<size_t>(pc.pp), 0.0);
    for (const StageReport& st : ev.stages)
      per_rank[static_cast<size_t>(st.rank)] += pc.microbatches / ev.schedule.copies * per_microbatch(st.cost);
    return *std::max_element(per_rank.begin(), per_rank.end());
  };
  m.expert_all_to_all_s =
      busiest_rank([](const StageCost& c) { return c.expert_comm_forward_s + c.expert_comm_backward_s; });
  m.host_wait_s = busiest_rank([](const StageCost& c) { return c.host_wait_s; });
  m.tokens_per_iteration = static_cast<double>(s.global_batch_size) * s.workload.seq_len;
  const double gpus = pc.gpus();
  if (s.model.transformer) {
    Workload whole = s.workload;
    whole.tp = 1;
    whole.cp = 1;
    whole.ep = 1;
    whole.etp = 1;
    whole.sequence_parallel = false;
    const double sequences = s.global_batch_size / static_cast<double>(s.workload.micro_batch_size);
    // Model FLOPs do not depend on recomputation; hardware FLOPs add each stage's own.
    Workload plain = whole;
    plain.recompute = Recompute::None;
    m.model_flops_per_iteration = model_flops_per_microbatch(s.model, plain) * sequences;
    double hardware = 0;
    for (const LayerWork& lw : staged_layer_work(s.model, whole, ranges, s.stage_recompute))
      hardware += lw.forward.flops() + lw.backward_input.flops() + lw.backward_weight.flops() + lw.recompute.flops();
    m.hardware_flops_per_iteration = hardware * sequences;
  }
  if (m.step_time_s > 0) {
    m.throughput_tokens_per_s = m.tokens_per_iteration / m.step_time_s;
    m.model_tflops_per_gpu = m.model_flops_per_iteration / m.step_time_s / gpus / 1e12;
    m.hardware_tflops_per_gpu = m.hardware_flops_per_iteration / m.step_time_s / gpus / 1e12;
    // Mixed clusters: utilisation is against the mean peak of every GPU in use.
    double peak = s.cluster.gpu.peak_flops;
    if (!s.cluster.node_groups.empty()) {
      peak = 0;
      for (int d = 0; d < pc.dp; ++d)
        for (int r = 0; r < pc.pp; ++r) peak += s.cluster.gpu_at(pipeline_rank_gpu(pc, r, d)).peak_flops;
      peak /= static_cast<double>(pc.pp) * pc.dp;
    }
    m.mfu = m.model_tflops_per_gpu * 1e12 / peak;
    m.hfu = m.hardware_tflops_per_gpu * 1e12 / peak;
  }
  m.memory_limit_bytes = s.cluster.memory_limit();
  for (const RankStats& r : ev.sim.ranks) m.peak_memory_bytes = std::max(m.peak_memory_bytes, r.peak_memory_bytes);
  for (const Overflow& o : overflows) m.peak_memory_bytes = std::max(m.peak_memory_bytes, o.need_bytes);
  // One entry per pipeline rank: the replica where it needs the most over its GPU.
  std::sort(overflows.begin(), overflows.end(), [](const Overflow& a, const Overflow& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.need_bytes - a.limit_bytes > b.need_bytes - b.limit_bytes;
  });
  for (const Overflow& o : overflows)
    if (m.overflows.empty() || m.overflows.back().rank != o.rank) m.overflows.push_back(o);
  return ev;
}

}  // namespace pw
