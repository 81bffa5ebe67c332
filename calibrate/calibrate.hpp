#pragma once
// `pipewright calibrate` as a library call: fits layers, links, collectives and run overheads, evaluates
// what was held out before calibration (analytic defaults, the profile alone) and after.
#include <string>
#include <vector>

#include "calibrate/calibration.hpp"

namespace pw {

struct CalibrateInputs {
  std::string profile;              // profile.json
  std::vector<std::string> runs;    // `pipewright run --json` outputs
  std::vector<std::string> traces;  // their --trace files, one per run, or none
  double holdout = 0;               // fraction in [0, 1) of micro-batch shapes and runs left out of the fit
  std::string cluster;              // the cluster whose GPU the analytic defaults run on; empty: the first run's
  std::vector<CollectiveSample> collectives;  // measured beside the profile's own (the CPU profile has none)
  bool accept_poor_fit = false;     // write a fit that fails check_fit() (flagged in it) instead of refusing it
};

// Which micro-batch shapes (b, s) are held out: the round(fraction x n) largest by tokens (at least one when
// fraction > 0); BadInput when fewer than 2 would remain for the fit.
std::vector<std::pair<int, int>> held_out_shapes(const std::vector<LayerProfile>& entries, double fraction,
                                                 const std::string& source);
// How many runs are held out (the last ones given): round(fraction x n), at least one when fraction > 0 and
// there are 2 runs or more, and never all.
int held_out_run_count(int runs, double fraction);

// BadInput naming the option or file and the fix for bad or insufficient data, and for a fit that fails
// check_fit() unless accept_poor_fit; warnings for what a fit can proceed without land in
// Calibration::warnings.
Calibration calibrate(const CalibrateInputs& in);

}  // namespace pw
