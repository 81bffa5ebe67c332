#pragma once
// `plan --train-tokens ... --spares K`: the plans the run trains on when nodes are down and no spare stands
// in, and per number of spare nodes held beside the run how often it runs short, its expected throughput,
// wall time, goodput and cost (core/spare_nodes.hpp).
#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/spare_nodes.hpp"
#include "core/time_to_train.hpp"
#include "planner/search.hpp"
#include "planner/spare_templates.hpp"

namespace pw {

struct SpareRow {
  int spares = 0;
  int gpus = 0;  // the run's and the spares'
  SpareOutcome outcome;
  TrainingRunCost run;  // at the expected throughput; GPU-hours count the spares too
};

std::vector<SpareRow> spare_rows(const SparePool& pool, int max_spares, const std::vector<SpareTemplate>& templates,
                                 const TrainingRunSpec& spec);

// `fixed`: what the templates keep of plan 1 ("tp=4, interleaved and no recompute").
void print_spare_table(std::ostream& out, const SparePool& pool, const TrainingRunSpec& spec, const std::string& fixed,
                       const std::vector<SpareTemplate>& templates, const std::vector<SpareRow>& rows);
nlohmann::ordered_json spare_json(const SparePool& pool, const std::vector<SpareTemplate>& templates,
                                  const std::vector<SpareRow>& rows);

}  // namespace pw
