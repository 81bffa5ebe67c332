#include "calibrate/run_fit.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "calibrate/calibrated_cost_model.hpp"
#include "core/error.hpp"

namespace pw {
namespace {

struct ActionCost {
  double seconds = 0;
  int phases = 0;  // F, B, W: 1; BW: 2; an F&B: 3 (the simulator's sums, each with its dispatch)
};

ActionCost action_cost(const Action& a, const std::vector<StageReport>& stages) {
  auto at = [&](int s) -> const StageCost& { return stages[static_cast<size_t>(s)].cost; };
  switch (a.op) {
    case Op::F: return {at(a.stage).forward_s, 1};
    case Op::B: return {at(a.stage).backward_input_s, 1};
    case Op::W: return {at(a.stage).backward_weight_s, 1};
    case Op::BW: return {at(a.stage).backward_input_s + at(a.stage).backward_weight_s, 2};
    case Op::FB:
      return {at(a.stage).forward_s + at(a.stage2).backward_input_s + at(a.stage2).backward_weight_s, 3};
    default: return {};
  }
}

// The part of [start, end] during which a transfer to or from `rank` was in flight, as a fraction.
double transfer_overlap(const TraceSlice& c, const RunTrace& trace, const Placement& placement) {
  const double length = c.end_s - c.start_s;
  if (length <= 0) return 0;
  std::vector<std::pair<double, double>> spans;
  for (const TraceSlice& s : trace.sends) {
    const int to_stage = s.action.op == Op::SendF ? s.action.stage + 1 : s.action.stage - 1;
    const bool touches = s.rank == c.rank || (to_stage >= 0 && to_stage < placement.stages() && placement.rank_of(to_stage) == c.rank);
    const double a = std::max(s.start_s, c.start_s), b = std::min(s.end_s, c.end_s);
    if (touches && b > a) spans.emplace_back(a, b);
  }
  std::sort(spans.begin(), spans.end());
  double covered = 0, reach = c.start_s;
  for (const auto& [a, b] : spans) {
    if (b <= reach) continue;
    covered += b - std::max(a, reach);
    reach = b;
  }
  return covered / length;
}

Calibration with_overheads(const Calibration& layers, const RunOverheads& o) {
  Calibration c = layers;
  c.overheads = o;
  return c;
}

}  // namespace

double simulated_step_s(const RunRecord& run, const CostModel& cost) { return evaluate(run.scenario, cost).sim.step_time_s; }

RunOverheads fit_run_overheads(const Calibration& layers, const std::vector<RunRecord>& runs, const CostModel& base,
                               std::vector<std::string>& warnings) {
  RunOverheads o;
  if (runs.empty()) return o;
  o.fitted = true;

  // Compute terms: rows of [predicted layer time, phases run, measured time x transfer overlap].
  const CalibratedCostModel plain(with_overheads(layers, RunOverheads{}), base);
  std::vector<std::array<double, 3>> rows;
  std::vector<double> y;
  for (const RunRecord& run : runs) {
    const Evaluation ev = evaluate(run.scenario, plain);
    if (run.trace) {
      for (const TraceSlice& s : run.trace->compute) {
        if (s.action.stage < 0 || s.action.stage >= static_cast<int>(ev.stages.size()))
          throw_bad_input("{}: {} names stage {} but the run has {} stages; give the trace of this run", run.trace->path,
                          to_text(s.action), s.action.stage, ev.stages.size());
        const ActionCost a = action_cost(s.action, ev.stages);
        const double measured = s.end_s - s.start_s;
        if (!(measured > 0)) continue;  // a slice too short for the clock says nothing
        // Slowed by s while a transfer is in flight (the simulator's rule), an action that spends the fraction
        // o of its measured time D beside transfers does D (1 - o) + D o / (1 + s) of work: D = work +
        // k D o with k = s / (1 + s), linear in the measured D o.
        rows.push_back({a.seconds, static_cast<double>(a.phases), measured * transfer_overlap(s, *run.trace, ev.schedule.placement)});
        y.push_back(measured);
      }
      continue;
    }
    for (int r = 0; r < ev.schedule.num_ranks(); ++r) {
      ActionCost total;
      for (const Action& a : ev.schedule.ranks[static_cast<size_t>(r)]) {
        const ActionCost c = action_cost(a, ev.stages);
        total.seconds += c.seconds;
        total.phases += c.phases;
      }
      rows.push_back({total.seconds, static_cast<double>(total.phases), 0.0});
      y.push_back(run.busy_s[static_cast<size_t>(r)]);
    }
  }
  const auto n = static_cast<Eigen::Index>(rows.size());
  Eigen::MatrixXd X(n, 3);
  Eigen::VectorXd Y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (int j = 0; j < 3; ++j) X(i, j) = rows[static_cast<size_t>(i)][static_cast<size_t>(j)];
    Y(i) = y[static_cast<size_t>(i)];
  }
  if (n < 3)
    warnings.push_back(fmt::format("runs: {} busy times for the compute scale and dispatch overhead; give more runs or "
                                   "their --trace files for a fit that is not exact by construction",
                                   n));
  const Eigen::VectorXd c = fit_non_negative(X, Y);
  if (!(c(0) > 0))
    throw_bad_input("runs: the measured busy times do not grow with the predicted layer times (compute scale fitted 0); "
                    "calibrate on real-compute runs of the profiled model on this machine");
  o.compute_scale = c(0);
  o.dispatch_s = c(1);
  if (c(2) >= 1)
    throw_bad_input("runs: the traces' compute does not progress while transfers run beside it (slowdown fitted "
                    "without bound); calibrate on traces of real-compute runs");
  o.transfer_slowdown = c(2) / (1 - c(2));
  std::vector<Residual> compute;
  for (Eigen::Index i = 0; i < n; ++i) compute.push_back({"", Y(i), X.row(i).dot(c)});
  o.compute_quality = fit_quality(compute);

  // transfer_s: the step times' relative squared error over a log grid, then golden-section refinement
  // between the best point's neighbours. The step time only grows with it, but the error need not be
  // convex in it, hence the grid first.
  bool any_links = false;
  for (const RunRecord& run : runs) any_links = any_links || !run.scenario.cluster.ideal;
  auto objective = [&](double t) {
    RunOverheads trial = o;
    trial.transfer_s = t;
    const CalibratedCostModel m(with_overheads(layers, trial), base);
    double sum = 0;
    for (const RunRecord& run : runs) {
      const double e = (simulated_step_s(run, m) - run.measured_step_s) / run.measured_step_s;
      sum += e * e;
    }
    return sum;
  };
  if (any_links) {
    double top = 0;
    for (const RunRecord& run : runs) top = std::max(top, run.measured_step_s);
    std::vector<double> grid{0.0};
    for (int k = 32; k >= 0; --k) grid.push_back(top * std::pow(10.0, -k / 4.0));
    std::vector<double> value;
    for (double t : grid) value.push_back(objective(t));
    const size_t best = static_cast<size_t>(std::min_element(value.begin(), value.end()) - value.begin());
    double lo = grid[best == 0 ? 0 : best - 1], hi = grid[std::min(best + 1, grid.size() - 1)];
    const double phi = (std::sqrt(5.0) - 1) / 2;
    double a = hi - phi * (hi - lo), b = lo + phi * (hi - lo);
    double fa = objective(a), fb = objective(b);
    for (int i = 0; i < 40; ++i) {
      if (fa <= fb) {
        hi = b;
        b = a;
        fb = fa;
        a = hi - phi * (hi - lo);
        fa = objective(a);
      } else {
        lo = a;
        a = b;
        fa = fb;
        b = lo + phi * (hi - lo);
        fb = objective(b);
      }
    }
    const double refined = (lo + hi) / 2;
    o.transfer_s = objective(refined) < value[best] ? refined : grid[best];
  } else {
    warnings.push_back("runs: all on the ideal cluster, whose transfers are free; transfer_s is not fitted (give the "
                       "runs a cluster with links, e.g. --cluster dgx-h100)");
  }

  const CalibratedCostModel fitted(with_overheads(layers, o), base);
  for (const RunRecord& run : runs) o.step_residuals.push_back({run.path, run.measured_step_s, simulated_step_s(run, fitted)});
  o.step_quality = fit_quality(o.step_residuals);
  return o;
}

}  // namespace pw
