#include "cli/failure_output.hpp"

#include <fmt/format.h>

#include "cli/plan_table.hpp"
#include "core/units.hpp"

namespace pw {

void print_after_failure(std::ostream& out, const std::string& heading, const AfterFailure& after, const CostModel& cost,
                         int threads) {
  out << "\n" << heading << ":\n";
  if (!after.report) {
    out << "no plan: " << after.verdict << "\n";
    return;
  }
  print_table(out, after.base, after.gpus_left, after.result, compare_splits(after.result.plans, cost, threads));
  const FailureReport& r = *after.report;
  out << fmt::format("\nafter the failure plan 1 uses {} of the {} GPUs left and loses {} of the throughput (for {} of the "
                     "GPUs); it changes {}\n",
                     r.gpus_used, r.gpus_left, format_percent(r.throughput_lost), format_percent(r.gpus_lost), r.changes);
}

nlohmann::ordered_json after_failure_json(const AfterFailure& after, const CostModel& cost, int threads) {
  nlohmann::ordered_json f = {{"gpus_left", after.gpus_left}};
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
