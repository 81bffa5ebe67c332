#pragma once
// What a configuration search takes, from its candidates before any is scored: each thread simulates one
// candidate at a time, so the largest schedule times the threads decides the memory.
#include <vector>

#include "core/work_estimate.hpp"
#include "planner/search.hpp"

namespace pw {

// Actions one candidate's simulation keeps: F, B and W for every micro-batch on every stage.
double candidate_actions(const Candidate& c);

// `threads`: the search's (at least 1). Work "42,048 candidates, the largest 6,442,450,941 actions (tp=1, pp=1,
// dp=1, micro-batch size 1, 2147483647 micro-batches)", fix "lower --global-batch-size".
WorkEstimate search_estimate(const std::vector<Candidate>& candidates, int threads);

}  // namespace pw
