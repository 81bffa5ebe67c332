#pragma once
// An evaluation as people read it (a table with units) and as programs read it (one JSON object).
#include <nlohmann/json.hpp>

#include <ostream>

#include "sim/scenario.hpp"

namespace pw {

void print_evaluation(std::ostream& out, const Evaluation& ev);
nlohmann::ordered_json evaluation_to_json(const Evaluation& ev);

}  // namespace pw
