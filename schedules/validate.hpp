#pragma once
// Checks a schedule: counts, dependency order, one rank per stage; on a lowered schedule also that every
// send has its receive and that the per-rank orders cannot deadlock. Errors carry the rank x step grid
// with the offending cell marked.
#include <string>
#include <vector>

#include "schedules/ir.hpp"

namespace pw {

// The generic dependency function from the stage graph: F(s-1,i) -> F(s,i); F(last,i) -> B(last,i);
// B(s+1,i) -> B(s,i); F(s,i) -> B(s,i); B(s,i) -> W(s,i). BW counts as B and W.
std::vector<Action> compute_dependencies(const Action& a, int num_stages);

// Throws BadInput with a message of the form "schedule <name>: <problem>\n<grid with the cell marked>".
void validate(const Schedule& s);

}  // namespace pw
