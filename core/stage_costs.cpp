#include "core/stage_costs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/balanced_split.hpp"
#include "core/error.hpp"
#include "core/expert_parallel.hpp"
#include "core/special_values.hpp"

namespace pw {

namespace {

// Gradients are reduced as they are kept (ParallelConfig::grad_bytes(): fp32, or bf16 with
// --grad-reduce-in-bf16); the distributed optimizer then all-gathers the updated bf16 weights.
constexpr double kGatheredWeightBytes = 2;
constexpr double kFp8WeightCopyBytes = 2;  // fp8 weight and its transpose

std::string join_plus(const std::vector<int>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? " + " : "") + std::to_string(v[i]);
  return out;
}

std::vector<LayerRange> explicit_split(const Model& model, int stages, const std::vector<int>& blocks) {
  if (static_cast<int>(blocks.size()) != stages)
    throw_bad_input("--split: {} numbers for {} stages; give one number per stage (per chunk with --vpp)", blocks.size(),
                    stages);
  long sum = 0;
  for (int b : blocks) {
    if (b < 0) throw_bad_input("--split: {} is negative; give each stage a number of layers >= 0", b);
    sum += b;
  }
  if (sum != model.num_blocks())
    throw_bad_input("--split: {} = {} layers but the model has {} transformer layers; give numbers that sum to {}",
                    join_plus(blocks), sum, model.num_blocks(), model.num_blocks());
  const int n = model.num_layers();
  const std::vector<int> block_at = model.block_indices();  // found once rather than per stage
  std::vector<LayerRange> ranges(stages);
  int taken = 0;  // blocks in the stages so far
  for (int s = 0; s < stages; ++s) {
    taken += blocks[s];
    ranges[s].first = s == 0 ? 0 : ranges[s - 1].last + 1;
    // A stage ends at its last block; the first stage keeps what precedes the first block
    // (the embedding) and the last stage whatever follows the last block (the head).
    if (s == stages - 1) ranges[s].last = n - 1;
    else if (taken > 0) ranges[s].last = block_at[taken - 1];
    else ranges[s].last = (block_at.empty() ? n : block_at[0]) - 1;
    if (ranges[s].count() < 1)
      throw_bad_input("--split: stage {} has 0 layers and holds neither the embedding nor the head; give it at least 1", s);
  }
  return ranges;
}

}  // namespace

std::vector<LayerRange> split_layers(const Model& model, int stages, const std::vector<int>& blocks_per_stage,
                                     const std::vector<double>& layer_cost) {
  const int n = model.num_layers();
  if (stages < 1) throw_bad_input("--pp x --vpp = {} stages; give at least 1 stage", stages);
  if (stages > n) throw_bad_input("--pp x --vpp = {} stages but the model has only {} layers; use fewer stages", stages, n);
  if (!blocks_per_stage.empty()) return explicit_split(model, stages, blocks_per_stage);

  std::vector<double> cost = layer_cost;
  if (cost.empty()) {
    // Without measured costs, a transformer block counts 1 and the embedding and head nothing.
    cost.resize(n);
    for (int i = 0; i < n; ++i) {
      const LayerKind k = model.layers[i].kind;
      cost[i] = k == LayerKind::Embedding || k == LayerKind::Head ? 0.0 : 1.0;
    }
  }
  if (static_cast<int>(cost.size()) != n)
    throw_runtime("split_layers: {} layer costs for a model of {} layers", cost.size(), n);
  for (double c : cost)
    if (!(c >= 0) || !std::isfinite(c)) throw_runtime("split_layers: layer cost {} is negative or not finite", c);
  std::vector<LayerRange> ranges;
  for (const auto& [first, last] : balanced_split(cost, stages)) ranges.push_back(LayerRange{first, last});
  return ranges;
}

LinkSpec group_link(const Cluster& cluster, int first, int stride, int n) {
  if (cluster.ideal || n <= 1) return LinkSpec{kInf, 0};
  // Past the measured matrix a pair's link depends only on where its members sit in their nodes, which
  // repeats every gpus_per_node members: the ring of a huge dp needs no more than that, and its closing pair.
  const std::int64_t measured = cluster.measured ? cluster.measured->gpus : 0;
  const std::int64_t repeats_from =
      std::max<std::int64_t>(0, (measured - first + stride - 1) / stride) + cluster.gpus_per_node;
  LinkSpec slowest{kInf, 0}, inside{kInf, 0};
  for (int i = 0; i < n; ++i) {
    if (i >= repeats_from && i < n - 1) i = n - 1;
    const int a = first + i * stride;
    const int b = first + ((i + 1) % n) * stride;
    const LinkSpec l = cluster.link(a, b);
    slowest = slower(slowest, l);
    if (!l.inter_node) inside = slower(inside, l);
  }
  // A measured matrix gives each pair its own link, which the rails do not change; a ring inside a node has none.
  if (cluster.measured || !slowest.inter_node) return slowest;
  return with_rails(slowest, inside,
                    fewest_members_per_node(cluster, n, [&](int i) { return first + static_cast<long>(i) * stride; }));
}

void check_grad_buckets(double parameters, double bucket, std::optional<int> stage) {
  const double buckets = std::ceil(parameters / bucket);
  if (buckets > kMaxGradBuckets)
    throw_bad_input("--ddp-bucket-size: buckets of {:g} parameters make {:.0f} buckets of {} {:.0f} parameters; at most {:.0f} "
                    "a stage are simulated; use buckets of {:.0f} parameters or more",
                    bucket, buckets, stage ? fmt::format("stage {}'s", *stage) : std::string("the model's"), parameters,
                    kMaxGradBuckets, std::ceil(parameters / kMaxGradBuckets));
}

GroupLinks group_links(const Cluster& cluster, const ParallelConfig& pc, int first_gpu) {
  GroupLinks links{group_link(cluster, first_gpu, 1, pc.tp), group_link(cluster, first_gpu, pc.tp, pc.cp), AllToAllLinks{}};
  if (pc.ep > 1 || pc.etp > 1) links.ep = all_to_all_links(cluster, pc, first_gpu);
  return links;
}

PhaseCost layer_phase_cost(const CostModel& cost, const Layer& layer, const LayerWork& work, Phase phase,
                           const GpuSpec& gpu, const GroupLinks& links, int tp) {
  return PhaseCost{cost.phase_time(layer, work, phase, gpu, links.tp, tp) + cost.cp_ring_time(work, phase, gpu, links.cp) +
                       cost.expert_comm_time(work, phase, links.ep),
                   cost.host_time(layer, work, phase, tp)};
}

double layer_phase_time(const CostModel& cost, const Layer& layer, const LayerWork& work, Phase phase, const GpuSpec& gpu,
                        const GroupLinks& links, int tp) {
  return layer_phase_cost(cost, layer, work, phase, gpu, links, tp).time();
}

std::vector<double> layer_step_costs(const Model& model, const Workload& w, const ParallelConfig& pc,
                                     const Cluster& cluster, const CostModel& cost, int first_gpu) {
  const GroupLinks links = group_links(cluster, pc, first_gpu);
  const GpuSpec& gpu = cluster.gpu_at(first_gpu);
  std::vector<double> out;
  out.reserve(model.layers.size());
  for (const Layer& layer : model.layers) {
    const LayerWork work = layer_work(model, layer, w);
    double t = 0;
    for (Phase ph : {Phase::Forward, Phase::BackwardInput, Phase::BackwardWeight})
      t += layer_phase_time(cost, layer, work, ph, gpu, links, pc.tp);
    out.push_back(t - cost.full_backward_saving(layer, work, pc.tp));
  }
  return out;
}

namespace {

// The per-layer all-gathers of ZeRO-3 over a stage, in layer order.
struct ZeroGathers {
  double total_s = 0, first_s = 0, last_s = 0;
  bool any = false;
  void add(double s) {
    if (!any) first_s = s;
    any = true;
    last_s = s;
    total_s += s;
  }
  // A phase of `compute_s` whose gathers start with `waited_s` (the first layer it runs).
  double behind(double compute_s, double waited_s) const {
    return any ? std::max(compute_s, total_s - waited_s) + waited_s : compute_s;
  }
};

}  // namespace

ParallelConfig expert_sharding(const ParallelConfig& pc) {
  ParallelConfig e = pc;
  e.dp = pc.expert_dp();
  e.cp = 1;
  e.dp_shard = 0;
  return e;
}

StateWidths state_widths(const ParallelConfig& pc) {
  return {pc.grad_reduce_in_bf16, pc.optimizer_precision.state_bytes()};
}

double state_bytes_per_parameter(const CostModel& cost, const ParallelConfig& pc, bool fp8) {
  const int n = pc.shard_group();
  const double gathered = pc.zero >= 3 && n > 1 && !pc.resharded() ? kGatheredWeightBytes : 0.0;
  // FSDP under pipelining accumulates whole gradients until the last micro-batch's reduce-scatter.
  const StateWidths widths = state_widths(pc);
  const double unsharded_grads = pc.zero >= 2 && !pc.gradients_sharded_each_microbatch()
                                     ? cost.model_state_bytes_per_parameter(n, 1, widths) -
                                           cost.model_state_bytes_per_parameter(n, 2, widths)
                                     : 0.0;
  return cost.model_state_bytes_per_parameter(n, pc.zero, widths) + gathered + unsharded_grads +
         (fp8 ? kFp8WeightCopyBytes : 0.0);
}

double zero3_layer_working_bytes(const ParallelConfig& pc, double layer_parameters) {
  if (pc.zero < 3 || pc.shard_group() <= 1) return 0;
  if (pc.resharded()) return layer_parameters * (2 * kGatheredWeightBytes + pc.grad_bytes());
  // Weights kept gathered: only the layer's gradient, whole until its reduce-scatter, when each micro-batch's is.
  return pc.gradients_sharded_each_microbatch() ? layer_parameters * pc.grad_bytes() : 0.0;
}

std::vector<StageCost> stage_costs(const Model& model, const LayerWorks& work,
                                   const std::vector<LayerRange>& ranges, const ParallelConfig& pc,
                                   const Cluster& cluster, const CostModel& cost, const std::vector<int>& stage_gpu,
                                   int copies) {
  if (work.size() != model.layers.size())
    throw_runtime("stage_costs: work for {} layers but the model has {}", work.size(), model.layers.size());
  if (stage_gpu.size() != ranges.size())
    throw_runtime("stage_costs: {} stage GPUs for {} stages", stage_gpu.size(), ranges.size());
  if (copies < 1 || ranges.size() % static_cast<size_t>(copies) != 0)
    throw_runtime("stage_costs: {} stages are not {} copies of the model's parts", ranges.size(), copies);
  const bool fp8 = std::any_of(work.begin(), work.end(), [](const LayerWork& lw) { return lw.fp8; });
  // Copies of the model (bidirectional DualPipe) reduce a part's gradients and shard its ZeRO state as
  // data-parallel peers: copies x dp members, on the dp ring's links (below).
  ParallelConfig sharding = pc;
  sharding.dp *= copies;
  const double state_per_param = state_bytes_per_parameter(cost, sharding, fp8);
  const ParallelConfig expert_pc = expert_sharding(sharding);
  const double routed_state_per_param = state_bytes_per_parameter(cost, expert_pc, fp8);
  const int expert_dp = sharding.expert_dp();
  // The shard group (dp_shard dp ranks with their cp ranks) and its replicas (hybrid sharding); without ZeRO the
  // whole dp-cp group.
  const auto shard_count = [](const ParallelConfig& c) { return c.distributed_optimizer() ? c.shard_group() : c.dp_cp(); };
  const auto replica_count = [](const ParallelConfig& c) { return c.distributed_optimizer() ? c.dp_replicas() : 1; };
  const int stages = static_cast<int>(ranges.size());

  // A DeepSeek-V3 MTP module on a GPU whose rank holds the embedding looks its tokens up in that table instead
  // of a copy of its own (the report, section 3.2.3: DualPipe puts the shallowest and the deepest layers on one
  // rank so that the MTP module and the main model share the embedding and the output head). Asked only for an
  // MTP layer: stage_costs runs in the partitioner's loop.
  const auto holds_embedding = [&](int gpu) {
    if (model.layers.front().kind != LayerKind::Embedding) return false;
    for (int t = 0; t < stages; ++t)
      if (ranges[t].first == 0 && stage_gpu[t] == gpu) return true;
    return false;
  };
  const double own_table = model.transformer ? static_cast<double>(model.transformer->vocab) * model.transformer->hidden / pc.tp : 0;

  std::vector<StageCost> out(stages);
  for (int s = 0; s < stages; ++s) {
    const LayerRange r = ranges[s];
    if (r.first < 0 || r.last >= model.num_layers() || r.count() < 1)
      throw_runtime("stage_costs: stage {} has layers [{}, {}] in a model of {} layers", s, r.first, r.last,
                    model.num_layers());
    StageCost& sc = out[s];
    sc.layers = r;
    const GroupLinks links = group_links(cluster, pc, stage_gpu[s]);
    const GpuSpec& gpu = cluster.gpu_at(stage_gpu[s]);  // mixed clusters: this stage's own GPU type
    // The shard group (dp_shard dp ranks with their cp ranks) reduce-scatters the gradients and gathers the
    // weights, its ring as slow as the slower of its cp and dp hops; with hybrid sharding the replicas then
    // all-reduce their shard across groups. Without ZeRO the whole dp-cp group all-reduces.
    const bool reduced = sharding.dp_cp() > 1;
    const int shards = shard_count(sharding), replicas = replica_count(sharding);
    // The rings' links from one copy's members; where they stay inside a node, the other copy's rank, on
    // another node or not, is on the ring too.
    const int copy_shard_dp = shard_count(pc) / pc.cp;
    const LinkSpec to_other_copy = copies > 1 && !cluster.ideal
                                       ? cluster.link(stage_gpu[s], stage_gpu[(s + stages / copies) % stages])
                                       : LinkSpec{kInf, 0};
    const auto with_other_copy = [&](LinkSpec l) { return l.inter_node ? l : slower(l, to_other_copy); };
    const LinkSpec dp_link =
        with_other_copy(slower(group_link(cluster, stage_gpu[s], dp_stride(pc), copy_shard_dp), links.cp));
    const LinkSpec replica_link =
        group_link(cluster, stage_gpu[s], dp_stride(pc) * copy_shard_dp, replica_count(pc));
    // The routed experts' gradients and ZeRO state go over the expert-data-parallel group instead.
    LinkSpec expert_dp_link = dp_link;
    if (expert_dp > 1 && (pc.ep > 1 || pc.etp > 1)) {
      const LinkSpec one_copy = pc.expert_dp() > 1 ? folded_ring_link(cluster, pc, stage_gpu[s], pc.etp * pc.ep, pc.expert_dp())
                                                   : LinkSpec{kInf, 0};
      expert_dp_link = with_other_copy(one_copy);
    }
    const int routed_shards = pc.distributed_optimizer() ? expert_dp : 1;
    ZeroGathers gathers;
    for (int i = r.first; i <= r.last; ++i) {
      const Layer& layer = model.layers[i];
      const LayerWork& lw = work[i];
      const PhaseCost f = layer_phase_cost(cost, layer, lw, Phase::Forward, gpu, links, pc.tp);
      const PhaseCost b = layer_phase_cost(cost, layer, lw, Phase::BackwardInput, gpu, links, pc.tp);
      const PhaseCost w = layer_phase_cost(cost, layer, lw, Phase::BackwardWeight, gpu, links, pc.tp);
      sc.forward_s += f.time();
      sc.backward_input_s += b.time();
      sc.backward_weight_s += w.time();
      sc.full_backward_saving_s += cost.full_backward_saving(layer, lw, pc.tp);
      sc.expert_comm_forward_s += cost.expert_comm_time(lw, Phase::Forward, links.ep);
      sc.expert_comm_backward_s += cost.expert_comm_time(lw, Phase::BackwardInput, links.ep);
      sc.host_forward_s += f.host_s;
      sc.host_backward_s += b.host_s + w.host_s;
      sc.host_wait_s += f.host_wait() + b.host_wait() + w.host_wait();
      sc.routed_parameters += lw.routed_parameters;
      sc.activation_bytes += lw.activation_bytes;
      sc.weight_grad_bytes += lw.weight_grad_bytes;
      sc.working_bytes = std::max(sc.working_bytes, lw.working_bytes + zero3_layer_working_bytes(pc, lw.parameters));
      sc.parameters += lw.parameters;
      if (layer.kind == LayerKind::Mtp && holds_embedding(stage_gpu[s])) sc.parameters -= own_table;
      if (pc.zero >= 3 && (shards > 1 || (lw.routed_parameters > 0 && expert_dp > 1)))
        gathers.add(cost.collective_time(CollectiveKind::AllGather, (lw.parameters - lw.routed_parameters) * kGatheredWeightBytes,
                                         shards, dp_link) +
                    cost.collective_time(CollectiveKind::AllGather, lw.routed_parameters * kGatheredWeightBytes, expert_dp,
                                         expert_dp_link));
    }
    // ZeRO-3 resharding after forward: each layer's weights are all-gathered before its forward and again
    // before its backward, every micro-batch, the next layer's prefetched during this one's compute: the
    // first gather waits, the rest hide behind the compute unless they take longer. Without resharding (the
    // default with pp: PyTorch's pipelining reshards only after the last backward) the weights are
    // gathered once a step, charged as the distributed optimizer's all-gather is, after the reduction.
    if (pc.resharded()) {
      sc.forward_s = gathers.behind(sc.forward_s, gathers.first_s);
      sc.backward_input_s = gathers.behind(sc.backward_input_s, gathers.last_s);
    }
    // Once per stage and phase, not per layer: an action runs its stage's layers as one unit.
    const double dispatch = cost.action_overhead_s();
    sc.forward_s += dispatch;
    sc.backward_input_s += dispatch;
    sc.backward_weight_s += dispatch;
    if (cost.full_backward_one_action()) sc.full_backward_saving_s += dispatch;
    sc.overlapped_fb_s = cost.overlapped_fb_time(sc.forward_s, sc.full_backward_s());
    sc.output_bytes = work[r.last].output_bytes;
    // A layer graph's edges that cross this boundary are relayed through it: each source's output once
    // (edges without bytes carry it; the last layer's own is counted above), each edge with bytes apart.
    if (r.last + 1 < model.num_layers()) {
      std::vector<int> relayed;
      for (const LayerEdge& e : model.edges) {
        if (e.from > r.last || e.to <= r.last) continue;
        if (e.bytes) {
          sc.output_bytes += *e.bytes;
        } else if (e.from != r.last && std::find(relayed.begin(), relayed.end(), e.from) == relayed.end()) {
          relayed.push_back(e.from);
          sc.output_bytes += work[e.from].output_bytes;
        }
      }
    }
    sc.reserved_bytes = s < pc.pp && !cluster.ideal ? cost.memory_reserve_bytes() : 0;  // ideal: no memory overheads
    const double dense = sc.parameters - sc.routed_parameters;
    sc.model_state_bytes = dense * state_per_param + sc.routed_parameters * routed_state_per_param + sc.reserved_bytes;

    const bool routed_reduced = sc.routed_parameters > 0 && expert_dp > 1;
    const double grad_bytes = pc.grad_bytes();
    sc.grad_reduce_bytes = (reduced ? dense * grad_bytes : 0) + (routed_reduced ? sc.routed_parameters * grad_bytes : 0);
    const bool any_reduced = reduced || routed_reduced;
    sc.reduce_every_microbatch = pc.gradients_sharded_each_microbatch() && any_reduced;
    const double bucket = pc.bucket_parameters > 0 ? pc.bucket_parameters : std::max(4e7, 1e6 * pc.dp_cp());
    const double buckets = pc.overlap_grad_reduce && any_reduced ? std::max(1.0, std::ceil(sc.parameters / bucket)) : 1.0;
    // Each bucket is a collective of its own in the simulation: their count is bounded before any is made.
    if (buckets > 1) check_grad_buckets(sc.parameters, bucket, s);
    sc.grad_buckets = static_cast<int>(buckets);
    const CollectiveKind reduce = pc.distributed_optimizer() ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
    const double dense_grads = dense * grad_bytes / sc.grad_buckets;
    const double routed_grads = sc.routed_parameters * grad_bytes / sc.grad_buckets;
    sc.grad_bucket_s = cost.collective_time(reduce, dense_grads, shards, dp_link) +
                       cost.collective_time(CollectiveKind::AllReduce, dense_grads / shards, replicas, replica_link) +
                       cost.collective_time(reduce, routed_grads, expert_dp, expert_dp_link);
    // ZeRO-3 with resharding gathers weights before each use instead (above), never after the step.
    const bool gathers_after = pc.distributed_optimizer() && !(pc.zero >= 3 && pc.resharded());
    const double gather =
        gathers_after ? cost.collective_time(CollectiveKind::AllGather, dense * kGatheredWeightBytes, shards, dp_link) +
                            cost.collective_time(CollectiveKind::AllGather, sc.routed_parameters * kGatheredWeightBytes,
                                                 expert_dp, expert_dp_link)
                      : 0.0;
    // Overlapped with the next step's first forward of this stage: the first bucket is waited for, and
    // whatever that forward cannot cover.
    sc.grad_gather_s = pc.overlap_param_gather && pc.overlap_grad_reduce
                           ? std::max(gather / sc.grad_buckets, gather - sc.forward_s)
                           : gather;
    sc.grad_reduce_s = sc.grad_buckets * sc.grad_bucket_s + sc.grad_gather_s;
    sc.optimizer_s = cost.optimizer_step_time(
        pc.distributed_optimizer() ? dense / shards + sc.routed_parameters / routed_shards : sc.parameters, gpu,
        state_widths(pc));
  }
  return out;
}

LayerWorks staged_layer_work(const Model& model, const Workload& w, const std::vector<LayerRange>& ranges,
                                         const std::vector<Recompute>& stage_recompute) {
  if (!stage_recompute.empty() && stage_recompute.size() != ranges.size())
    throw_runtime("staged_layer_work: {} recompute levels for {} stages", stage_recompute.size(), ranges.size());
  LayerWorks work;
  work.reserve(model.layers.size());
  for (size_t s = 0; s < ranges.size(); ++s) {
    Workload level = w;
    if (!stage_recompute.empty()) level.recompute = stage_recompute[s];
    append_layer_works(model, ranges[s].first, ranges[s].last, level, work);
  }
  if (work.size() != model.layers.size())
    throw_runtime("staged_layer_work: the ranges cover {} of {} layers", work.size(), model.layers.size());
  return work;
}

std::vector<StageCost> stage_costs(const Model& model, const std::vector<LayerRange>& ranges, const Workload& w,
                                   const ParallelConfig& pc, const Cluster& cluster, const CostModel& cost,
                                   const std::vector<int>& stage_gpu, int copies) {
  if (w.tp != pc.tp) throw_runtime("stage_costs: workload tp {} differs from the parallel config's tp {}", w.tp, pc.tp);
  LayerWorks work;
  work.reserve(model.layers.size());
  append_layer_works(model, 0, model.num_layers() - 1, w, work);
  return stage_costs(model, work, ranges, pc, cluster, cost, stage_gpu, copies);
}

}  // namespace pw
