#pragma once
// How many (stage, micro-batch) activation sets each rank holds at its worst point of the order:
// a set is allocated by the F part and freed by the last backward part. The simulator turns this
// into bytes; schedules are compared by it (1F1B: min(p - r, m) on rank r; GPipe: m).
#include <vector>

#include "schedules/ir.hpp"

namespace pw {

enum class HeldUntil {
  LastBackward,  // until W (or BW): the whole activation set and the W inputs
  InputGrad,     // until B (or BW): the bulk of the activations, as the zero-bubble paper counts
};

// Per rank, the peak count over the rank's list in order (communication actions ignored). Units are
// stage micro-batches: with v chunks per rank one unit is about 1/v of a rank's activations.
std::vector<int> peak_in_flight(const Schedule& s, HeldUntil until = HeldUntil::LastBackward);

}  // namespace pw
