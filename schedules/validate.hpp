#pragma once
// Checks a schedule: counts, dependency order, one rank per stage; on a lowered schedule also that every
// send has its receive and that the per-rank orders cannot deadlock. Errors carry the rank x step grid
// with the offending cell marked.
#include <string>
#include <vector>

#include "schedules/ir.hpp"

namespace pw {

// The generic dependency function from the stage graph: F(s-1,i) -> F(s,i); F(last,i) -> B(last,i);
// B(s+1,i) -> B(s,i); F(s,i) -> B(s,i); B(s,i) -> W(s,i). BW counts as B and W. With copies of the model
// (Schedule::copies) a copy's first and last stages are every stages_per_copy: no F(s-1) before the first,
// no B(s+1) after the last.
// The result names parts as plain F, B or W actions: "B(s,i)" is done by B, BW or the backward half
// of a composite. A composite needs what both halves need; SEND_F/SEND_B need the action that
// produces the tensor; receives need only their matching send, which validate() checks.
std::vector<Action> compute_dependencies(const Action& a, int stages_per_copy);

// Throws BadInput with a message of the form
//   "schedule <name>: <problem> at rank <r>, step <k>: '<cell>' <detail>"
// and, as its details, the rank x step grid with the offending cells in [ ]
// (problems without a cell, such as a missing action, name the stage and micro-batch instead).
// Checks, in order: placement and ranges (every action's stage and micro-batch exist, each stage runs
// on the rank the placement gives it); counts (m F per stage; each micro-batch's backward exactly once,
// as B+W, BW or a composite's half); compute order (each rank's list run in order while its
// dependencies are done, anywhere; cells stuck when nothing can progress are the error); on lowered
// schedules also that every send has one receive on the peer rank and every tensor crossing ranks has
// both, and that the lists cannot deadlock when a receive blocks until its send is issued and sends
// never block.
void validate(const Schedule& s);

}  // namespace pw
