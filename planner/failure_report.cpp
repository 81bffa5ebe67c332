#include "planner/failure_report.hpp"

#include "core/error.hpp"
#include "planner/plan_explanation.hpp"

namespace pw {

int plan_gpus(const Candidate& c) { return c.tp * c.cp * c.pp * c.dp; }

FailureReport failure_report(const Plan& before, int gpus_before, const Plan& after, int gpus_left) {
  FailureReport r;
  r.gpus_before = gpus_before;
  r.gpus_left = gpus_left;
  r.gpus_used = plan_gpus(after.config);
  r.throughput_lost = 1 - after.evaluation.metrics.throughput_tokens_per_s / before.evaluation.metrics.throughput_tokens_per_s;
  r.gpus_lost = 1 - static_cast<double>(gpus_left) / gpus_before;
  const std::vector<StageReport>& a = after.evaluation.stages;
  const std::vector<StageReport>& b = before.evaluation.stages;
  r.same_split = a.size() == b.size();
  for (size_t i = 0; r.same_split && i < a.size(); ++i)
    r.same_split = a[i].layers.first == b[i].layers.first && a[i].layers.last == b[i].layers.last;
  r.changes = describe_difference(after.config, before.config);
  if (r.changes == "the same configuration") r.changes = "nothing but the GPUs";
  r.changes += r.same_split ? "; the same split" : "; a new split";
  return r;
}

AfterFailure replan(const Scenario& left, const SearchSpace& space, int gpus_left, const CostModel& cost,
                    const SearchOptions& options, const Plan& before, int gpus_before) {
  AfterFailure out;
  out.base = left;
  out.gpus_left = gpus_left;
  SearchSpace what_is_left = space;
  what_is_left.gpus = gpus_left;
  what_is_left.up_to_gpus = true;
  try {
    out.result = search_plans(left, what_is_left, cost, options);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;
    out.verdict = e.what();
    return out;
  }
  out.report = failure_report(before, gpus_before, out.result.plans.front(), gpus_left);
  return out;
}

}  // namespace pw
