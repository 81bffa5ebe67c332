#pragma once
// `plan --explain`: the best plan's step broken down, what binds it, and what each runner-up loses.
#include <nlohmann/json.hpp>

#include <ostream>

#include "planner/plan_explanation.hpp"

namespace pw {

void print_explanation(std::ostream& out, const PlanExplanation& e);
nlohmann::ordered_json explanation_json(const PlanExplanation& e);

}  // namespace pw
