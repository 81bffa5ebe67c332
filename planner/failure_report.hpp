#pragma once
// What a failure costs a run: the best plan before and the best on what is left, the throughput lost
// against the GPUs lost, and what the run must change.
#include <optional>
#include <string>

#include "planner/recovery_ways.hpp"
#include "planner/search.hpp"

namespace pw {

struct FailureReport {
  int gpus_before = 0;
  int gpus_left = 0;
  int gpus_used = 0;  // by the plan after: what is left, less what no configuration could use
  double throughput_lost = 0;  // fraction of tokens/s
  double gpus_lost = 0;        // fraction of the GPUs
  bool same_split = false;
  std::string changes;  // "tp=8 (not 4), dp=24 (not 32)"
};

FailureReport failure_report(const Plan& before, int gpus_before, const Plan& after, int gpus_left);

struct AfterFailure {
  Scenario base;  // what the run is left with (the cluster without the failed nodes)
  int gpus_left = 0;
  SearchResult result;
  std::optional<FailureReport> report;  // none: nothing fits on what is left
  std::string verdict;                  // then why
  // Dropping replicas, re-splitting and this re-plan, ranked by tokens per second (planner/recovery_ways.hpp).
  std::vector<RecoveryAnswer> ways;
  Plan before;  // the plan the run had
  double batch_tolerance = kDefaultBatchTolerance;
};

// The search of `space` on `left` (the base scenario on what the failure leaves), with at most `gpus_left`
// GPUs and the same global batch, against the plan the run had; and the other ways on, the batch moving
// by at most `batch_tolerance` where replicas are dropped.
AfterFailure replan(const Scenario& left, const SearchSpace& space, int gpus_left, const CostModel& cost,
                    const SearchOptions& options, const Plan& before, int gpus_before,
                    double batch_tolerance = kDefaultBatchTolerance);

// The GPUs a plan uses: tp x cp x pp x dp.
int plan_gpus(const Candidate& c);

// What a way on changes against the plan the run had: "dp=7 (not 8), 73 micro-batches (not 64), global batch
// 511 (-0.2%); the same split".
std::string recovery_changes(const Plan& way, const Plan& before);

}  // namespace pw
