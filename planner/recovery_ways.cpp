#include "planner/recovery_ways.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/units.hpp"

namespace pw {

namespace {

// Micro-batch counts tried, nearest the batch first: a schedule that takes none of the nearest takes none.
constexpr std::size_t kMostBatchesTried = 16;

std::string replicas(int dp) { return fmt::format("{} replica{}", dp, dp == 1 ? "" : "s"); }

}  // namespace

const char* to_string(RecoveryWay way) {
  switch (way) {
    case RecoveryWay::DropReplicas: return "drop replicas";
    case RecoveryWay::Resplit: return "re-split";
    case RecoveryWay::Replan: return "re-plan";
  }
  return "?";
}

RecoveryAnswer drop_replicas(const Plan& before, const Cluster& left, int gpus_left, double batch_tolerance,
                             const CostModel& cost) {
  RecoveryAnswer answer{RecoveryWay::DropReplicas, std::nullopt, ""};
  const Scenario& running = before.evaluation.scenario;
  const ParallelConfig& pc = running.parallel;
  const int replica = pc.tp * pc.cp * pc.pp;
  const int dp = std::min(pc.dp, gpus_left / replica);
  if (dp < 1) {
    answer.verdict = fmt::format("one replica needs {} GPUs (tp x cp x pp) and {} are left", replica, gpus_left);
    return answer;
  }
  const int mbs = running.workload.micro_batch_size;
  const long batch = running.global_batch_size;
  const long per_microbatch = static_cast<long>(dp) * mbs;
  // Micro-batch counts whose batch is within the tolerance, nearest the batch first (the larger of two as
  // near): the first the schedule takes and memory holds is the answer, the batch moved least.
  const long fewest = std::max(1L, static_cast<long>(std::ceil(batch * (1 - batch_tolerance) / per_microbatch - 1e-9)));
  const long most = static_cast<long>(std::floor(batch * (1 + batch_tolerance) / per_microbatch + 1e-9));
  // Only the counts nearest the batch's own are tried: the range may hold millions.
  const long nearest = std::lround(static_cast<double>(batch) / per_microbatch);
  const long span = static_cast<long>(kMostBatchesTried);
  std::vector<long> counts;
  for (long m = std::max(fewest, nearest - span); m <= std::min(most, nearest + span); ++m) counts.push_back(m);
  std::sort(counts.begin(), counts.end(), [&](long a, long b) {
    const long da = std::abs(a * per_microbatch - batch), db = std::abs(b * per_microbatch - batch);
    return da != db ? da < db : a > b;
  });
  if (counts.size() > kMostBatchesTried) counts.resize(kMostBatchesTried);
  std::string refused;
  for (long m : counts) {
    Scenario s = running;
    s.cluster = left;
    s.imported_schedule.reset();
    s.parallel.dp = dp;
    s.parallel.microbatches = static_cast<int>(m);
    s.global_batch_size = static_cast<int>(m * per_microbatch);
    try {
      Evaluation ev = evaluate(s, cost);
      if (!ev.metrics.overflows.empty()) {
        if (refused.empty())
          refused = fmt::format("{} of {} micro-batches need{} {} a GPU, more than its {}", replicas(dp), m, dp == 1 ? "s" : "",
                                format_bytes(ev.metrics.peak_memory_bytes),
                                left.memory_limit_text(ev.metrics.memory_limit_bytes));
        continue;
      }
      answer.plan = Plan{candidate_of(ev.scenario), std::move(ev), {}};
      return answer;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
      if (refused.empty()) refused = e.what();  // the nearest batch's reason
    }
  }
  if (answer.plan) return answer;
  if (!refused.empty()) {
    answer.verdict = refused;
    return answer;
  }
  const long below = std::max(1L, batch / per_microbatch) * per_microbatch, above = below + per_microbatch;
  const auto moved = [&](long sequences) { return fmt::format("{:+.1f}%", (static_cast<double>(sequences) / batch - 1) * 100); };
  answer.verdict = fmt::format("{} of micro-batches of {} run{} {} or {} sequences, {} or {} from the global batch of "
                               "{}: beyond --batch-tolerance {}",
                               replicas(dp), mbs, dp == 1 ? "s" : "", below, above, moved(below), moved(above), batch, format_percent(batch_tolerance));
  return answer;
}

RecoveryAnswer resplit(const Plan& before, const Scenario& left, int gpus_left, const CostModel& cost,
                       const SearchOptions& options) {
  RecoveryAnswer answer{RecoveryWay::Resplit, std::nullopt, ""};
  const Candidate& c = before.config;
  const int pp = gpus_left / (c.tp * c.cp * c.dp);
  if (pp < 1) {
    answer.verdict = fmt::format("tp x cp x dp is {} GPUs and {} are left", c.tp * c.cp * c.dp, gpus_left);
    return answer;
  }
  SearchSpace space;
  space.gpus = gpus_left;
  space.up_to_gpus = true;
  space.tp = c.tp;
  space.cp = c.cp;
  space.ep = c.ep;
  space.etp = c.etp;
  space.dp = c.dp;
  space.max_pp = std::min(pp, c.pp);
  space.micro_batch_size = c.micro_batch_size;
  space.precisions = {c.precision};
  space.zeros = {c.zero};
  space.order = c.order;
  SearchOptions one = options;
  one.top = 1;
  one.progress = nullptr;
  Scenario base = left;
  base.imported_schedule.reset();
  base.ranges.clear();
  base.split.clear();
  base.stage_recompute.clear();
  try {
    SearchResult r = search_plans(base, space, cost, one);
    answer.plan = std::move(r.plans.front());
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;
    answer.verdict = fmt::format("tp x cp x dp = {} GPUs leave room for {} pipeline rank{}: {}", c.tp * c.cp * c.dp, pp,
                                 pp == 1 ? "" : "s", e.what());
  }
  return answer;
}

void rank_answers(std::vector<RecoveryAnswer>& answers) {
  std::stable_sort(answers.begin(), answers.end(), [](const RecoveryAnswer& a, const RecoveryAnswer& b) {
    if (a.plan.has_value() != b.plan.has_value()) return a.plan.has_value();
    if (!a.plan) return a.way < b.way;
    const double ta = a.plan->evaluation.metrics.throughput_tokens_per_s, tb = b.plan->evaluation.metrics.throughput_tokens_per_s;
    return ta != tb ? ta > tb : a.way < b.way;
  });
}

}  // namespace pw
