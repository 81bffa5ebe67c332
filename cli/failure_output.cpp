#include "cli/failure_output.hpp"

#include <fmt/format.h>

#include "cli/plan_table.hpp"
#include "core/units.hpp"

namespace pw {

namespace {

double throughput_lost(const Plan& way, const Plan& before) {
  return 1 - way.evaluation.metrics.throughput_tokens_per_s / before.evaluation.metrics.throughput_tokens_per_s;
}

void print_ways(std::ostream& out, const AfterFailure& after) {
  const std::string row = "{:>3}  {:<13}  {:>6}  {:>10}  {:>10}  {:>6}  {}\n";
  out << fmt::format(fmt::runtime(row), "#", "way", "GPUs", "step time", "tokens/s", "lost", "changes");
  for (size_t i = 0; i < after.ways.size(); ++i) {
    const RecoveryAnswer& w = after.ways[i];
    if (!w.plan) {
      out << fmt::format(fmt::runtime(row), i + 1, to_string(w.way), "-", "-", "-", "-", "none: " + w.verdict);
      continue;
    }
    const Metrics& m = w.plan->evaluation.metrics;
    out << fmt::format(fmt::runtime(row), i + 1, to_string(w.way), with_commas(plan_gpus(w.plan->config)),
                       format_seconds(m.step_time_s), format_short(m.throughput_tokens_per_s),
                       format_percent(throughput_lost(*w.plan, after.before)), recovery_changes(*w.plan, after.before));
  }
  out << fmt::format(
      "drop replicas: every degree but dp kept, the split and micro-batch size too, the global batch within "
      "--batch-tolerance {};\nre-split: tp, cp, dp, the micro-batch size and global batch kept, the layers over fewer "
      "pipeline ranks;\nre-plan: everything searched again on what is left, the same global batch. lost: "
      "tokens/s against the plan before.\n",
      format_percent(after.batch_tolerance));
}

}  // namespace

void print_after_failure(std::ostream& out, const std::string& heading, const AfterFailure& after, const CostModel& cost,
                         int threads) {
  out << "\n" << heading << "; the ways on, by tokens/s:\n";
  print_ways(out, after);
  if (!after.report) return;
  out << fmt::format("\nthe re-plan's plans on the {} GPUs left:\n", after.gpus_left);
  print_table(out, after.base, after.gpus_left, after.result, compare_splits(after.result.plans, cost, threads));
  const FailureReport& r = *after.report;
  out << fmt::format("\nre-plan: plan 1 uses {} of the {} GPUs left and loses {} of the throughput (for {} of the GPUs); "
                     "it changes {}\n",
                     r.gpus_used, r.gpus_left, format_percent(r.throughput_lost), format_percent(r.gpus_lost), r.changes);
}

nlohmann::ordered_json after_failure_json(const AfterFailure& after, const CostModel& cost, int threads) {
  nlohmann::ordered_json ways = nlohmann::ordered_json::array();
  for (const RecoveryAnswer& w : after.ways) {
    nlohmann::ordered_json way = {{"way", to_string(w.way)}};
    if (!w.plan) {
      way["verdict"] = w.verdict;
    } else {
      const Evaluation& ev = w.plan->evaluation;
      way["gpus"] = plan_gpus(w.plan->config);
      way["global_batch_size"] = ev.scenario.global_batch_size;
      way["step_time_s"] = ev.metrics.step_time_s;
      way["throughput_tokens_per_s"] = ev.metrics.throughput_tokens_per_s;
      way["throughput_lost"] = throughput_lost(*w.plan, after.before);
      way["changes"] = recovery_changes(*w.plan, after.before);
    }
    ways.push_back(std::move(way));
  }
  nlohmann::ordered_json f = {{"gpus_left", after.gpus_left}, {"batch_tolerance", after.batch_tolerance}, {"ways", ways}};
  if (!after.report) {
    f["verdict"] = after.verdict;
    return f;
  }
  const FailureReport& r = *after.report;
  f["gpus_used"] = r.gpus_used;
  f["throughput_lost"] = r.throughput_lost;
  f["gpus_lost"] = r.gpus_lost;
  f["changes"] = r.changes;
  f["plans"] = plans_json(after.base, after.gpus_left, after.result, compare_splits(after.result.plans, cost, threads))["plans"];
  return f;
}

}  // namespace pw
