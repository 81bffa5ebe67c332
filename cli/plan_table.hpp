#pragma once
// The plan table `plan` prints (one row per plan: degrees, schedule, split, step time, throughput, MFU, bubble,
// memory and what the plan gains over the uniform and parameters splits) and its --json form.
#include <nlohmann/json.hpp>

#include <ostream>
#include <vector>

#include "planner/search.hpp"

namespace pw {

void print_table(std::ostream& out, const Scenario& base, int gpus, const SearchResult& r,
                 const std::vector<SplitComparison>& cmp);
nlohmann::ordered_json plans_json(const Scenario& base, int gpus, const SearchResult& r,
                                  const std::vector<SplitComparison>& cmp);
// What a plan gains over another split of its configuration: {"step_time_s", "fits", "peak_memory_bytes", "gain"}.
nlohmann::ordered_json gain_json(const Evaluation& plan, const Evaluation& other);

}  // namespace pw
