#pragma once
// The schedule as the terminal shows it: one row per rank over the step time, so that the bubbles can
// be seen without opening a trace viewer.
#include <string>
#include <vector>

#include "sim/pipeline_sim.hpp"

namespace pw {

// One row per rank, `width` columns spanning [0, step_time_s]; each column shows the compute action
// that occupies most of its time slice: 'F', 'B', 'W', 'b' (BW), 'X' (F&BW composite), or '.' when idle
// time is the largest part. With `color`, a cell is the micro-batch mod 10 coloured by op (ANSI).
// Then a time axis with units and a legend. Only compute-lane events are drawn. Throws BadInput when
// width < 10 or step_time_s <= 0.
std::string render_timeline(const std::vector<SimEvent>& events, int ranks, double step_time_s, int width,
                            bool color);

}  // namespace pw
