#pragma once
// The classic pipeline picture as SVG: one row per rank, one coloured box per compute action on a
// time axis, labelled with its micro-batch; idle time stays empty. The times come from the simulator
// (pipewright show) or from asap_timing() (schedule pictures without a cluster).
#include <string>
#include <vector>

#include "schedules/ir.hpp"
#include "schedules/timing.hpp"

namespace pw {

struct TimedAction {
  int rank = 0;
  Action action;  // compute actions are drawn; communication actions are skipped
  double start_s = 0;
  double end_s = 0;
};

struct SvgOptions {
  std::string title;    // drawn above the rows; empty: none
  int width_px = 1200;  // the whole picture
};

// Colours by op (F blue, B green, W yellow, BW purple, F&B teal), lighter for a rank's second and
// later chunks; a box's label is its micro-batch ("4/0" for a composite: forward 4, backward 0) when
// it fits, and its tooltip the action and its times. Throws BadInput when span_s <= 0, width_px < 200
// or a box names a rank outside the placement.
std::string schedule_svg(const std::vector<TimedAction>& boxes, const Placement& placement, double span_s,
                         const SvgOptions& options);

// The compute actions of `s` with the times asap_timing() gave them.
std::vector<TimedAction> timed_actions(const Schedule& s, const ScheduleTiming& timing);

}  // namespace pw
