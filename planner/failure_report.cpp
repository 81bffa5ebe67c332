#include "planner/failure_report.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "planner/plan_explanation.hpp"

namespace pw {

int plan_gpus(const Candidate& c) { return c.tp * c.cp * c.pp * c.dp; }

namespace {

bool same_split(const Plan& a, const Plan& b) {
  const std::vector<StageReport>& x = a.evaluation.stages;
  const std::vector<StageReport>& y = b.evaluation.stages;
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].layers.first != y[i].layers.first || x[i].layers.last != y[i].layers.last) return false;
  return true;
}

}  // namespace

std::string recovery_changes(const Plan& way, const Plan& before) {
  std::string changes = describe_difference(way.config, before.config);
  if (changes == "the same configuration") changes = "nothing but the GPUs";
  const long batch = way.evaluation.scenario.global_batch_size, batch_before = before.evaluation.scenario.global_batch_size;
  if (batch != batch_before) {
    const int m = way.config.microbatches, m_before = before.config.microbatches;
    changes += fmt::format(", {} micro-batches{}, global batch {} ({:+.1f}%)", m,
                           m == m_before ? "" : fmt::format(" (not {})", m_before), batch,
                           (static_cast<double>(batch) / batch_before - 1) * 100);
  }
  return changes + (same_split(way, before) ? "; the same split" : "; a new split");
}

FailureReport failure_report(const Plan& before, int gpus_before, const Plan& after, int gpus_left) {
  FailureReport r;
  r.gpus_before = gpus_before;
  r.gpus_left = gpus_left;
  r.gpus_used = plan_gpus(after.config);
  r.throughput_lost = 1 - after.evaluation.metrics.throughput_tokens_per_s / before.evaluation.metrics.throughput_tokens_per_s;
  r.gpus_lost = 1 - static_cast<double>(gpus_left) / gpus_before;
  r.same_split = same_split(after, before);
  r.changes = recovery_changes(after, before);
  return r;
}

AfterFailure replan(const Scenario& left, const SearchSpace& space, int gpus_left, const CostModel& cost,
                    const SearchOptions& options, const Plan& before, int gpus_before, double batch_tolerance) {
  AfterFailure out;
  out.before = before;
  out.batch_tolerance = batch_tolerance;
  out.base = left;
  out.gpus_left = gpus_left;
  out.ways = {drop_replicas(before, left.cluster, gpus_left, batch_tolerance, cost),
              resplit(before, left, gpus_left, cost, options)};
  SearchSpace what_is_left = space;
  what_is_left.gpus = gpus_left;
  what_is_left.up_to_gpus = true;
  what_is_left.dp.reset();  // fixed for the GPUs the run had
  RecoveryAnswer replanned{RecoveryWay::Replan, std::nullopt, ""};
  try {
    out.result = search_plans(left, what_is_left, cost, options);
    out.report = failure_report(before, gpus_before, out.result.plans.front(), gpus_left);
    replanned.plan = out.result.plans.front();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;
    out.verdict = e.what();
    replanned.verdict = e.what();
  }
  out.ways.push_back(std::move(replanned));
  rank_answers(out.ways);
  return out;
}

}  // namespace pw
