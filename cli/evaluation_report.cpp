#include "cli/evaluation_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/expert_parallel.hpp"
#include "core/rank_order.hpp"
#include "core/units.hpp"
#include "core/version.hpp"
#include "sim/evaluation_json.hpp"

namespace pw {
namespace {

std::string layer_range_text(const Model& model, const LayerRange& r) {
  auto name = [&](int i) { return model.layers[static_cast<size_t>(i)].name; };
  if (r.first == r.last) return name(r.first);
  return fmt::format("{}..{}", name(r.first), name(r.last));
}

std::string tokens_rate(double tokens_per_s) { return format_short(tokens_per_s) + " tokens/s"; }

// "per stage: full, full, none, none".
std::string stage_recompute_text(const std::vector<Recompute>& levels) {
  std::string out = "per stage: ";
  for (size_t i = 0; i < levels.size(); ++i) out += (i ? ", " : "") + std::string(to_string(levels[i]));
  return out;
}

// What selective recomputation reruns when it is more than the attention core: "selective: moe_act, layernorm",
// or after per-stage levels "per stage: full, selective; selective: moe_act, layernorm".
std::string selective_modules_text(const Scenario& s) {
  if (!s.selective_somewhere() || s.workload.recompute_modules.is_default()) return "";
  return fmt::format("{}: {}", s.stage_recompute.empty() ? "" : "; selective",
                     fmt::join(module_names(s.workload.recompute_modules), ", "));
}

}  // namespace

void print_evaluation(std::ostream& out, const Evaluation& ev) {
  const Scenario& s = ev.scenario;
  const ParallelConfig& pc = s.parallel;
  const Metrics& m = ev.metrics;
  out << fmt::format("{} on {}: {} GPU{} (tp {}, {}pp {}, dp {}{}{}), schedule {}\n", s.model.name, s.cluster.name,
                     pc.gpus(), pc.gpus() == 1 ? "" : "s", pc.tp, pc.cp > 1 ? fmt::format("cp {}, ", pc.cp) : "", pc.pp,
                     pc.dp, pc.vpp > 1 ? fmt::format(", vpp {}", pc.vpp) : "",
                     pc.pp > 1 && pc.dp > 1 ? fmt::format(", order {}", to_string(pc.order)) : "", s.schedule);
  // Explicit-cost models have no sequence length of their own unless --seq-len gives one.
  const std::string tokens = s.workload.seq_len > 1 ? fmt::format(" of {} tokens", s.workload.seq_len) : "";
  out << fmt::format("micro-batch size {} x {} micro-batches x dp {} = global batch {} sequences{}, recompute {}{}\n\n",
                     s.workload.micro_batch_size, pc.microbatches, pc.dp, s.global_batch_size, tokens,
                     (s.stage_recompute.empty() ? to_string(s.workload.recompute) : stage_recompute_text(s.stage_recompute)) +
                         selective_modules_text(s),
                     std::string(pc.tp > 1 ? (s.workload.sequence_parallel ? ", sequence parallel" : ", no sequence parallel") : "") +
                         (s.workload.flash_attention ? ", flash attention" : "") +
                         (s.workload.precision == Precision::Fp8 ? ", fp8" : "") +
                         (s.workload.activation_fp8_input_store ? ", fp8 activation inputs" : ""));

  auto row = [&](const char* label, const std::string& value) { out << fmt::format("  {:<24}{}\n", label, value); };
  row("step time", format_seconds(m.step_time_s));
  row("throughput", tokens_rate(m.throughput_tokens_per_s));
  if (m.model_flops_per_iteration > 0) {
    row("model FLOP/s per GPU", format_tflops(m.model_tflops_per_gpu * 1e12));
    row("hardware FLOP/s per GPU", format_tflops(m.hardware_tflops_per_gpu * 1e12) + " (recompute counted)");
    row("MFU", format_percent(m.mfu));
  }
  row("bubble", format_percent(m.bubble_fraction));
  if (s.parallel.dp_cp() > 1)
    row("exposed dp comm", fmt::format("{} ({} of the step; ZeRO-{}{}, {}{})", format_seconds(m.exposed_dp_comm_s),
                                       format_percent(m.step_time_s > 0 ? m.exposed_dp_comm_s / m.step_time_s : 0),
                                       s.parallel.zero,
                                       s.parallel.dp_replicas() > 1
                                           ? fmt::format(" over {} GPUs x {} replicas", s.parallel.shard_group(),
                                                         s.parallel.dp_replicas())
                                           : "",
                                       s.parallel.grad_reduce_in_bf16 ? "bf16 gradients, " : "",
                                       s.parallel.overlap_grad_reduce ? "buckets overlapped with the last backward"
                                                                      : "reduced after the last backward"));
  if (m.expert_all_to_all_s > 0)
    row("expert all-to-all", fmt::format("{} on the busiest rank ({} of the step; ep {}{}{}{})",
                                         format_seconds(m.expert_all_to_all_s),
                                         format_percent(m.step_time_s > 0 ? m.expert_all_to_all_s / m.step_time_s : 0),
                                         s.parallel.ep, s.parallel.etp > 1 ? fmt::format(", etp {}", s.parallel.etp) : "",
                                         s.workload.dispatcher == Workload::Dispatcher::Flex ? ", flex dispatcher" : "",
                                         has_composites(ev.schedule) ? ", partly hidden in F&B composites" : ""));
  if (m.expert_all_to_all_s > 0 && !s.cluster.ideal) {
    // An ep group spread one GPU a node sends every copy over the network: name the order that packs it.
    const int spans = ep_group_nodes(s.cluster, s.parallel);
    for (RankOrder other : rank_orders()) {
      ParallelConfig packed = s.parallel;
      packed.order = other;
      const int fewer = ep_group_nodes(s.cluster, packed);
      if (other != s.parallel.order && fewer < spans)
        row("", fmt::format("note: rank order {} spreads ep {} over {} nodes; --rank-order {} keeps it in {} "
                            "(Megatron-Core's order, tp-cp-ep-dp-pp)",
                            to_string(s.parallel.order), s.parallel.ep, spans, to_string(other), fewer));
    }
  }
  if (m.host_wait_s > 0)
    row("waiting on the host", fmt::format("{} on the busiest rank ({} of the step: its MoE blocks issued slower than "
                                           "they run; larger micro-batches amortize it)",
                                           format_seconds(m.host_wait_s),
                                           format_percent(m.step_time_s > 0 ? m.host_wait_s / m.step_time_s : 0)));
  if (!s.synchronous_optimizer)
    row("optimizer step", fmt::format("post-validated, steady state of {} iterations", ev.sim.iterations));
  const std::string limit = s.cluster.memory_limit_text(m.memory_limit_bytes);
  std::string peak = fmt::format("{} of {}", format_bytes(m.peak_memory_bytes), limit);
  if (const OptimizerPrecision& op = s.parallel.optimizer_precision; op.precision_aware)
    peak += fmt::format(" (precision-aware optimizer: {} B of optimizer state a parameter, Adam moments in {} and {})",
                        *op.state_bytes(), to_string(op.exp_avg), to_string(op.exp_avg_sq));
  row("peak memory", peak);
  out << "\n";

  out << fmt::format("  {:>4}  {:>5}  {:<28} {:>10} {:>10} {:>12} {:>12} {:>10} {:>11} {:>9}\n", "rank", "stage", "layers",
                     "busy", "idle", "activations", "model state", "working", "peak mem", "in-flight");
  for (const RankStats& r : ev.sim.ranks) {
    bool first = true;
    for (const StageReport& st : ev.stages) {
      if (st.rank != r.rank) continue;
      if (first)
        out << fmt::format("  {:>4}  {:>5}  {:<28} {:>10} {:>10} {:>12} {:>12} {:>10} {:>11} {:>9}\n", r.rank, st.stage,
                           layer_range_text(s.model, st.layers), format_seconds(r.busy_s), format_seconds(r.idle_s),
                           format_bytes(r.activation_peak_bytes), format_bytes(r.model_state_bytes),
                           format_bytes(r.working_bytes), format_bytes(r.peak_memory_bytes), r.peak_inflight_microbatches);
      else
        out << fmt::format("  {:>4}  {:>5}  {:<28}\n", "", st.stage, layer_range_text(s.model, st.layers));
      first = false;
    }
  }
  if (ev.replica > 0)
    out << fmt::format("\n  data-parallel replica {} shown: the slowest, on the cluster's mixed GPUs or links\n", ev.replica);
  for (const Overflow& o : m.overflows)
    out << fmt::format("\n  does not fit: rank {} needs {}, {} more than the {} it may use", o.rank, format_bytes(o.need_bytes),
                       format_bytes(o.need_bytes - o.limit_bytes), s.cluster.memory_limit_text(o.limit_bytes));
  if (!m.overflows.empty()) out << "\n";
}

nlohmann::ordered_json evaluation_to_json(const Evaluation& ev) {
  using nlohmann::ordered_json;
  const Scenario& s = ev.scenario;
  const ParallelConfig& pc = s.parallel;
  ordered_json stages = ordered_json::array();
  for (const StageReport& st : ev.stages) {
    ordered_json stage = {{"stage", st.stage},
                          {"layers", {st.layers.first, st.layers.last}},
                          {"forward_s", st.cost.forward_s},
                          {"backward_input_s", st.cost.backward_input_s},
                          {"backward_weight_s", st.cost.backward_weight_s}};
    // B and W as one pass (a BW action), where it was measured to cost less than the two apart.
    if (st.cost.full_backward_saving_s > 0) stage["full_backward_s"] = st.cost.full_backward_s();
    if (!s.stage_recompute.empty()) stage["recompute"] = to_string(s.stage_recompute[static_cast<size_t>(st.stage)]);
    stage.update(rank_stats_json(ev.sim.ranks[static_cast<size_t>(st.rank)]));  // the stage's rank
    stages.push_back(stage);
  }
  ordered_json overflows = ordered_json::array();
  for (const Overflow& o : ev.metrics.overflows)
    overflows.push_back({{"rank", o.rank}, {"need_bytes", o.need_bytes}, {"limit_bytes", o.limit_bytes},
                         {"over_bytes", o.need_bytes - o.limit_bytes}});
  ordered_json out = {{"pipewright_version", kVersion},
                      {"model", s.model.name},
                      {"cluster", s.cluster.name},
                      {"schedule", s.schedule},
                      {"tp", pc.tp},
                      {"cp", pc.cp},
                      {"ep", pc.ep},
                      {"etp", pc.etp},
                      {"pp", pc.pp},
                      {"dp", pc.dp},
                      {"vpp", pc.vpp},
                      {"micro_batch_size", s.workload.micro_batch_size},
                      {"microbatches", pc.microbatches},
                      {"global_batch_size", s.global_batch_size},
                      {"seq_len", s.workload.seq_len},
                      {"recompute", to_string(s.workload.recompute)},
                      {"recompute_modules", module_names(s.workload.recompute_modules)},
                      {"grad_reduce_in_bf16", s.parallel.grad_reduce_in_bf16},
                      {"precision_aware_optimizer", s.parallel.optimizer_precision.precision_aware},
                      {"exp_avg_dtype", to_string(s.parallel.optimizer_precision.exp_avg)},
                      {"exp_avg_sq_dtype", to_string(s.parallel.optimizer_precision.exp_avg_sq)},
                      {"sequence_parallel", s.workload.sequence_parallel},
                      {"flash_attention", s.workload.flash_attention},
                      {"activation_fp8_input_store", s.workload.activation_fp8_input_store},
                      {"synchronous_optimizer", s.synchronous_optimizer},
                      {"iterations_simulated", ev.sim.iterations},
                      {"rank_order", to_string(pc.order)},
                      {"replica", ev.replica}};
  out.update(metrics_json(ev.metrics));
  out["overflows"] = overflows;
  out["stages"] = stages;
  return out;
}

}  // namespace pw
