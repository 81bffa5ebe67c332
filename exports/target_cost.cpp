#include "exports/target_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "core/units.hpp"

namespace pw {

namespace {

const char* framework_name(ExportTarget t) {
  switch (t) {
    case ExportTarget::Megatron: return "Megatron-LM";
    case ExportTarget::DeepSpeed: return "DeepSpeed";
    case ExportTarget::Torchtitan: return "torchtitan";
  }
  return "?";
}

// What of `c` the target cannot run, in words.
std::string ruled_out(ExportTarget t, const Candidate& c) {
  const std::string name = framework_name(t);
  std::vector<std::string> reasons;
  const std::vector<std::string> schedules = export_schedules(t);
  if (std::find(schedules.begin(), schedules.end(), c.schedule) == schedules.end())
    reasons.push_back(fmt::format("{} has no {} schedule", name, c.schedule));
  const std::vector<Recompute> recomputes = export_recomputes(t);
  if (std::find(recomputes.begin(), recomputes.end(), c.recompute) == recomputes.end())
    reasons.push_back(fmt::format("{} has no {} recompute", name, to_string(c.recompute)));
  if (c.cp > 1 && !export_runs_cp(t)) reasons.push_back(fmt::format("{} runs no context parallelism", name));
  if (c.cp > 1 && export_runs_cp(t) && c.zero < export_min_zero_with_cp(t))
    reasons.push_back(fmt::format("{} shards the state over the cp ranks (ZeRO-{})", name, export_min_zero_with_cp(t)));
  const std::vector<Precision> precisions = export_precisions(t);
  if (std::find(precisions.begin(), precisions.end(), c.precision) == precisions.end())
    reasons.push_back(fmt::format("{} does not run {} as simulated", name, to_string(c.precision)));
  // The two orders differ only with both pp and dp.
  if (const std::optional<RankOrder> order = export_rank_order(t); order && *order != c.order && c.pp > 1 && c.dp > 1)
    reasons.push_back(fmt::format("{} places ranks {}", name, to_string(*order)));
  if (c.dp * c.cp > 1) {
    try {
      check_zero_level(t, c.zero);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
      reasons.push_back(fmt::format("{} does not run ZeRO-{}", name, c.zero));
    }
  }
  if (reasons.empty()) reasons.push_back(fmt::format("{} runs its experts otherwise", name));
  std::string out = reasons.front();
  for (size_t i = 1; i < reasons.size(); ++i) out += "; " + reasons[i];
  return out;
}

}  // namespace

TargetCost target_cost(ExportTarget target, const Scenario& base, const SearchSpace& open, const Plan& best,
                       const CostModel& cost, const SearchOptions& options) {
  TargetCost out;
  SearchOptions one = options;
  one.top = 1;
  one.progress = nullptr;
  try {
    const SearchResult r = search_plans(base, open, cost, one);
    const Plan& fastest = r.plans.front();
    const double step = fastest.evaluation.metrics.step_time_s, own = best.evaluation.metrics.step_time_s;
    if (step < own) {
      out.outside = fastest;
      out.gain = 1 - step / own;
      out.why = ruled_out(target, fastest.config);
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;  // nothing outside fits either: the limits cost nothing
  }
  return out;
}

std::string target_cost_text(ExportTarget target, const TargetCost& c) {
  const std::string head = fmt::format("--export {}: the search kept to what {} runs", to_string(target), framework_name(target));
  if (!c.outside) return head + "; that cost nothing, no plan outside it is faster";
  return fmt::format("{}; it ruled out {}, which takes {} a step, {} less than plan 1 ({})", head,
                     describe(c.outside->config), format_seconds(c.outside->evaluation.metrics.step_time_s),
                     format_percent(c.gain), c.why);
}

}  // namespace pw
