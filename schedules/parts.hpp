#pragma once
// The units of work a compute action completes, so that B+W, BW and the composite FB can be counted,
// ordered and lowered by one rule: F, B (input gradient) and W (weight gradient) of one
// (stage, micro-batch). BW completes B and W; FB completes F of its first half and B and W of its
// second.
#include <vector>

#include "schedules/ir.hpp"

namespace pw {

enum class Part { F, B, W };

struct WorkPart {
  Part part = Part::F;
  int stage = 0;
  int microbatch = 0;

  friend bool operator==(const WorkPart&, const WorkPart&) = default;
};

// Empty for communication actions.
std::vector<WorkPart> parts_of(const Action& a);

// The action that does exactly this part alone: F, B or W.
Action action_of(const WorkPart& part);

}  // namespace pw
