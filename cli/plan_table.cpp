#include "cli/plan_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/units.hpp"
#include "core/work_estimate.hpp"

namespace pw {
namespace {

// Items with runs of equal neighbours folded: {11, 12, 12, 11} -> "11,12x2,11".
std::string folded_runs(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size();) {
    size_t j = i;
    while (j + 1 < items.size() && items[j + 1] == items[i]) ++j;
    const size_t run = j - i + 1;
    out += (out.empty() ? "" : ",") + (run > 1 ? fmt::format("{}x{}", items[i], run) : items[i]);
    i = j + 1;
  }
  return out;
}

// Transformer blocks per stage with runs folded: "11,12x6,11".
std::string split_text(const Evaluation& ev) {
  std::vector<std::string> blocks;
  for (const LayerRange& layers : model_parts(ev)) {
    int n = 0;
    for (int i = layers.first; i <= layers.last; ++i)
      if (ev.scenario.model.layers[static_cast<size_t>(i)].kind == LayerKind::Block ||
          ev.scenario.model.layers[static_cast<size_t>(i)].kind == LayerKind::Explicit)
        ++n;
    blocks.push_back(std::to_string(n));
  }
  return folded_runs(blocks);
}

// Each stage's recompute level with runs folded, as the split: "Fx2,N" (full on two stages, then none);
// the mode's name when the stages do not have levels of their own.
std::string recompute_text(const Evaluation& ev) {
  const std::vector<Recompute>& levels = ev.scenario.stage_recompute;
  if (levels.empty()) return to_string(ev.scenario.workload.recompute);
  std::vector<std::string> letters;
  for (Recompute r : levels) letters.push_back(r == Recompute::Full ? "F" : r == Recompute::Selective ? "S" : "N");
  return folded_runs(letters);
}

// The plan's value of a setting and its twins' where they differ, "tp-pp-dp/tp-dp-pp".
template <typename Name>
std::string with_twins(const Plan& p, const std::string& own, Name name) {
  std::string out = own;
  std::vector<std::string> seen{own};
  for (const Candidate& t : p.twins) {
    const std::string v = name(t);
    if (std::find(seen.begin(), seen.end(), v) != seen.end()) continue;
    seen.push_back(v);
    out += "/" + v;
  }
  return out;
}

std::vector<int> blocks_per_stage(const Evaluation& ev) {
  std::vector<int> out;
  for (const LayerRange& layers : model_parts(ev)) {
    int n = 0;
    for (int i = layers.first; i <= layers.last; ++i)
      if (ev.scenario.model.layers[static_cast<size_t>(i)].kind != LayerKind::Embedding &&
          ev.scenario.model.layers[static_cast<size_t>(i)].kind != LayerKind::Head)
        ++n;
    out.push_back(n);
  }
  return out;
}

// What the plan gains over another split of the same configuration: its step time / the plan's - 1.
std::string gain_text(const Evaluation& plan, const Evaluation& other) {
  if (!other.metrics.overflows.empty()) return "OOM";
  return fmt::format("{:+.1f}%", (other.metrics.step_time_s / plan.metrics.step_time_s - 1) * 100);
}

}  // namespace

nlohmann::ordered_json gain_json(const Evaluation& plan, const Evaluation& other) {
  return {{"step_time_s", other.metrics.step_time_s},
          {"fits", other.metrics.overflows.empty()},
          {"peak_memory_bytes", other.metrics.peak_memory_bytes},
          {"gain", other.metrics.step_time_s / plan.metrics.step_time_s - 1}};
}

namespace {



}  // namespace

void print_table(std::ostream& out, const Scenario& base, int gpus, const SearchResult& r,
                 const std::vector<SplitComparison>& cmp) {
  const Scenario& s0 = r.plans.front().evaluation.scenario;
  const double limit = s0.cluster.memory_limit();
  const std::string tokens = s0.workload.seq_len > 1 ? fmt::format(" of {} tokens", s0.workload.seq_len) : "";
  // One precision for all: named in the heading; mixed: a column.
  bool mixed = false;
  for (const Plan& p : r.plans) mixed = mixed || p.config.precision != r.plans.front().config.precision;
  out << fmt::format("{} on {}: {} GPUs, global batch {} sequences{}{}\n", base.model.name, base.cluster.name, gpus,
                     base.global_batch_size, tokens,
                     !mixed && r.plans.front().config.precision == Precision::Fp8 ? ", fp8" : "");
  out << fmt::format("searched {} configurations; the {} fastest that fit{}:\n\n", with_commas(r.stats.candidates),
                     r.plans.size(), std::isinf(limit) ? "" : fmt::format(" in {} per GPU", s0.cluster.memory_limit_text(limit)));
  std::vector<std::string> splits, recomputes, orders, schedules;
  size_t split_width = 5, recompute_width = 9, order_width = 8, schedule_width = 11;
  bool per_stage = false;
  for (const Plan& p : r.plans) {
    splits.push_back(split_text(p.evaluation));
    split_width = std::max(split_width, splits.back().size());
    recomputes.push_back(with_twins(p, recompute_text(p.evaluation), [](const Candidate& c) { return std::string(to_string(c.recompute)); }));
    recompute_width = std::max(recompute_width, recomputes.back().size());
    orders.push_back(with_twins(p, to_string(p.evaluation.scenario.parallel.order),
                                [](const Candidate& c) { return std::string(to_string(c.order)); }));
    order_width = std::max(order_width, orders.back().size());
    schedules.push_back(with_twins(p, p.config.schedule, [](const Candidate& c) { return c.schedule; }));
    schedule_width = std::max(schedule_width, schedules.back().size());
    per_stage = per_stage || !p.evaluation.scenario.stage_recompute.empty();
  }
  // ep and etp only for models with routed experts; precision only where the listed plans differ in it.
  const bool moe = base.model.transformer && base.model.transformer->moe;
  const std::string expert_cells = moe ? "  {:>3}  {:>3}" : "{}{}";
  const std::string precision_cell = mixed ? "  {:<9}" : "{}";
  const std::string row = "{:>3}  {:>2}  {:>2}" + expert_cells +
                          "  {:>3}  {:>4}  {:>4}  {:>3}  {:>3}  {:>5}" + precision_cell +
                          "  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:>10}  {:>10}  {:>6}  {:>6}  {:>9}  {:>10}  {:>9}\n";
  out << fmt::format(fmt::runtime(row), "#", "tp", "cp", moe ? "ep" : "", moe ? "etp" : "", "pp", "dp", "zero", "vpp", "mbs", "m",
                     mixed ? "precision" : "", "schedule", schedule_width,
                     "recompute",
                     recompute_width, "split", split_width, "order", order_width, "step time", "tokens/s", "MFU", "bubble", "peak mem",
                     "vs uniform", "vs params");
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const Plan& p = r.plans[i];
    const Evaluation& ev = p.evaluation;
    const Metrics& m = ev.metrics;
    out << fmt::format(fmt::runtime(row), i + 1, p.config.tp, p.config.cp, moe ? std::to_string(p.config.ep) : "",
                       moe ? std::to_string(p.config.etp) : "", p.config.pp, p.config.dp, p.config.zero,
                       p.config.vpp, p.config.micro_batch_size, p.config.microbatches,
                       mixed ? to_string(p.config.precision) : "", schedules[i], schedule_width,
                       recomputes[i], recompute_width,
                       splits[i], split_width, orders[i], order_width, format_seconds(m.step_time_s), format_short(m.throughput_tokens_per_s),
                       m.model_flops_per_iteration > 0 ? format_percent(m.mfu) : "-", format_percent(m.bubble_fraction),
                       format_bytes(m.peak_memory_bytes), gain_text(ev, cmp[i].uniform), gain_text(ev, cmp[i].parameters));
  }
  out << "\nsplit: transformer layers per stage (per chunk with vpp > 1; NxK: K stages of N), the embedding on the\n"
         "first stage and the head on the last. vs uniform / vs params: how much longer a step takes with the same\n"
         "configuration split evenly by layers (Megatron-LM's default) or by parameters (DeepSpeed's\n"
         "partition_method=\"parameters\"); OOM: that split does not fit. order: where ranks sit, tp innermost;\n"
         "tp-pp-dp keeps pipeline neighbours in a node, tp-dp-pp keeps data-parallel peers (--out lists every GPU).\n"
         "a/b: configurations differing only there gave the same step time and memory, one row for them. cp: GPUs\n"
         "splitting each sequence; zero: the ZeRO level (--zeros: the lowest listed that fits). bubble: the share\n"
         "of the step the pipeline ranks wait with nothing to run (fill, drain, transfers not hidden; the exposed\n"
         "data-parallel reduction not counted), averaged over the ranks.\n";
  bool reordered = false;
  for (size_t i = 1; i < r.plans.size(); ++i)
    reordered = reordered || r.plans[i].evaluation.metrics.step_time_s < r.plans[i - 1].evaluation.metrics.step_time_s;
  if (reordered || r.fastest)
    out << fmt::format("rows: plans within {} of the fastest step come first, by fewer pipeline ranks, then less peak\n"
                       "memory (a near tie a practitioner would take; --explain says what it cost).\n",
                       format_percent(kPreferWithin));
  if (moe)
    out << "ep: GPUs the routed experts spread over, folded into each stage's tp x cp x dp GPUs; etp: GPUs splitting\n"
           "each expert.\n";
  if (per_stage)
    out << "recompute per stage: F full, S selective, N none (NxK: K stages), the lightest that fits each stage.\n";
}

namespace {


std::vector<std::string> stage_recompute_names(const Evaluation& ev) {
  std::vector<std::string> out;
  for (const StageReport& st : ev.stages)
    out.push_back(to_string(ev.scenario.stage_recompute.empty() ? ev.scenario.workload.recompute
                                                                : ev.scenario.stage_recompute[static_cast<size_t>(st.stage)]));
  return out;
}

nlohmann::ordered_json twins_json(const Plan& p) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Candidate& t : p.twins)
    out.push_back({{"schedule", t.schedule}, {"rank_order", to_string(t.order)}, {"recompute", to_string(t.recompute)}});
  return out;
}

}  // namespace

nlohmann::ordered_json plans_json(const Scenario& base, int gpus, const SearchResult& r,
                                  const std::vector<SplitComparison>& cmp) {
  nlohmann::ordered_json plans = nlohmann::ordered_json::array();
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const Plan& p = r.plans[i];
    const Evaluation& ev = p.evaluation;
    const Metrics& m = ev.metrics;
    nlohmann::ordered_json ranges = nlohmann::ordered_json::array();
    for (const LayerRange& layers : model_parts(ev)) ranges.push_back({layers.first, layers.last});
    plans.push_back({{"tp", p.config.tp},
                     {"cp", p.config.cp},
                     {"ep", p.config.ep},
                     {"etp", p.config.etp},
                     {"pp", p.config.pp},
                     {"dp", p.config.dp},
                     {"zero", p.config.zero},
                     {"precision", to_string(p.config.precision)},
                     {"vpp", p.config.vpp},
                     {"micro_batch_size", p.config.micro_batch_size},
                     {"microbatches", p.config.microbatches},
                     {"schedule", p.config.schedule},
                     {"recompute", to_string(p.config.recompute)},
                     {"stage_recompute", stage_recompute_names(ev)},
                     {"rank_order", to_string(ev.scenario.parallel.order)},
                     {"twins", twins_json(p)},
                     {"split", blocks_per_stage(ev)},
                     {"layer_ranges", ranges},
                     {"step_time_s", m.step_time_s},
                     {"throughput_tokens_per_s", m.throughput_tokens_per_s},
                     {"mfu", m.mfu},
                     {"bubble_fraction", m.bubble_fraction},
                     {"peak_memory_bytes", m.peak_memory_bytes},
                     {"expert_all_to_all_s", m.expert_all_to_all_s},
                     {"vs_uniform", gain_json(ev, cmp[i].uniform)},
                     {"vs_parameters", gain_json(ev, cmp[i].parameters)}});
  }
  return {{"model", base.model.name},
          {"cluster", base.cluster.name},
          {"gpus", gpus},
          {"global_batch_size", base.global_batch_size},
          {"configurations", r.stats.candidates},
          {"plans", plans}};
}

namespace {


}  // namespace

}  // namespace pw
