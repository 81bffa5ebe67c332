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
    case Op::BW: return {at(a.stage).full_backward_s(), 2};
    case Op::FB: return {at(a.stage).forward_s + at(a.stage2).full_backward_s(), 3};
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

namespace {

// The compute rows: per action (a trace) or per rank (busy times), the predicted layer seconds and phases
// run, against the measured seconds and the fraction of them spent beside a transfer.
struct ComputeRows {
  std::vector<std::array<double, 2>> x;
  std::vector<double> measured;
  std::vector<double> overlap;
};

// Compute scale and dispatch for a given slowdown s. Slowed by s while a transfer is in flight (the
// simulator's rule), a row that spent the fraction o of its measured time D beside transfers did
// D (1 - o) + D o / (1 + s) = D (1 - k o) of work, k = s / (1 + s): that work is the target, each row
// weighted by its own size so that every k is judged on the same scale. Returns the sum of squared relative
// errors; `o` gets the terms and their quality.
double fit_compute_terms(const ComputeRows& rows, double slowdown, RunOverheads& o) {
  const double k = slowdown / (1 + slowdown);
  const auto n = static_cast<Eigen::Index>(rows.x.size());
  Eigen::MatrixXd X(n, 2);
  Eigen::VectorXd work(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    X(i, 0) = rows.x[static_cast<size_t>(i)][0];
    X(i, 1) = rows.x[static_cast<size_t>(i)][1];
    work(i) = rows.measured[static_cast<size_t>(i)] * (1 - k * rows.overlap[static_cast<size_t>(i)]);
  }
  const Eigen::VectorXd c = fit_non_negative(X, work);
  o.compute_scale = c(0);
  o.dispatch_s = c(1);
  o.transfer_slowdown = slowdown;
  std::vector<Residual> compute;
  double sse = 0;
  for (Eigen::Index i = 0; i < n; ++i) {
    // The fitted time of the row: its fitted work, stretched again by the slowdown where it overlapped.
    const double overlap = rows.overlap[static_cast<size_t>(i)];
    const double fitted = X.row(i).dot(c) / (1 - k * overlap);
    compute.push_back({"", rows.measured[static_cast<size_t>(i)], fitted});
    const double e = (X.row(i).dot(c) - work(i)) / std::max(work(i), 1e-12);
    sse += e * e;
  }
  o.compute_quality = fit_quality(compute);
  return sse;
}

// The slowdown with the least error, over a grid from 0 to kMaxSlowdown refined by golden-section search
// around the best point (ties: the smaller). Communication that more than doubles the time of the compute
// beside it is not what the term stands for: a best point at that bound says the rows want something else.
constexpr double kMaxSlowdown = 1.0;
double fit_slowdown(const ComputeRows& rows) {
  auto error = [&](double s) {
    RunOverheads trial;
    return fit_compute_terms(rows, s, trial);
  };
  std::vector<double> grid;
  for (int i = 0; i <= 40; ++i) grid.push_back(i * kMaxSlowdown / 40);
  std::vector<double> value;
  for (double s : grid) value.push_back(error(s));
  const size_t best = static_cast<size_t>(std::min_element(value.begin(), value.end()) - value.begin());
  return golden_minimum(error, grid[best == 0 ? 0 : best - 1], grid[std::min(best + 1, grid.size() - 1)], grid[best],
                        value[best]);
}

// transfer_s: the step times' relative squared error over a log grid, then golden-section refinement
// between the best point's neighbours. The step time only grows with it, but the error need not be
// convex in it, hence the grid first. Returns that error at the value chosen.
double fit_transfer_cost(RunOverheads& o, const Calibration& layers, const std::vector<RunRecord>& runs,
                         const CostModel& base) {
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
  bool any_links = false;
  for (const RunRecord& run : runs) any_links = any_links || !run.scenario.cluster.ideal;
  if (!any_links) return objective(o.transfer_s);
  double top = 0;
  for (const RunRecord& run : runs) top = std::max(top, run.measured_step_s);
  std::vector<double> grid{0.0};
  for (int k = 32; k >= 0; --k) grid.push_back(top * std::pow(10.0, -k / 4.0));
  std::vector<double> value;
  for (double t : grid) value.push_back(objective(t));
  const size_t best = static_cast<size_t>(std::min_element(value.begin(), value.end()) - value.begin());
  o.transfer_s = golden_minimum(objective, grid[best == 0 ? 0 : best - 1], grid[std::min(best + 1, grid.size() - 1)],
                                grid[best], value[best]);
  return objective(o.transfer_s);
}

}  // namespace

RunOverheads fit_run_overheads(const Calibration& layers, const std::vector<RunRecord>& runs, const CostModel& base,
                               std::vector<std::string>& warnings) {
  RunOverheads o;
  if (runs.empty()) return o;
  o.fitted = true;

  const CalibratedCostModel plain(with_overheads(layers, RunOverheads{}), base);
  ComputeRows rows;
  bool overlaps = false;
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
        rows.x.push_back({a.seconds, static_cast<double>(a.phases)});
        rows.measured.push_back(measured);
        rows.overlap.push_back(transfer_overlap(s, *run.trace, ev.schedule.placement));
        overlaps = overlaps || rows.overlap.back() > 0;
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
      rows.x.push_back({total.seconds, static_cast<double>(total.phases)});
      rows.measured.push_back(run.busy_s[static_cast<size_t>(r)]);
      rows.overlap.push_back(0);
    }
  }
  if (rows.x.size() < 3)
    warnings.push_back(fmt::format("runs: {} busy times for the compute scale and dispatch overhead; give more runs or "
                                   "their --trace files for a fit that is not exact by construction",
                                   rows.x.size()));
  fit_compute_terms(rows, 0, o);
  if (!(o.compute_scale > 0))
    throw_bad_input("runs: the measured busy times do not grow with the predicted layer times (compute scale fitted 0); "
                    "calibrate on real-compute runs of the profiled model on this machine");
  bool any_links = false;
  for (const RunRecord& run : runs) any_links = any_links || !run.scenario.cluster.ideal;
  if (!any_links)
    warnings.push_back("runs: all on the ideal cluster, whose transfers are free; transfer_s is not fitted (give the "
                       "runs a cluster with links, e.g. --cluster dgx-h100)");
  double step_error = fit_transfer_cost(o, layers, runs, base);

  // The slowdown is kept only when, with the terms refitted around it, the simulated runs match their step
  // times better: per-action rows alone can credit it with whatever else makes the actions beside a
  // transfer longer (on CPUs, the first action after a rank woke from a receive).
  if (overlaps) {
    RunOverheads slowed = o;
    fit_compute_terms(rows, fit_slowdown(rows), slowed);
    if (slowed.compute_scale > 0 && slowed.transfer_slowdown > 0 && slowed.transfer_slowdown < kMaxSlowdown * 0.999) {
      const double slowed_error = fit_transfer_cost(slowed, layers, runs, base);
      if (slowed_error < step_error * (1 - 1e-9)) {
        o = slowed;
        step_error = slowed_error;
      }
    }
  }

  const CalibratedCostModel fitted(with_overheads(layers, o), base);
  for (const RunRecord& run : runs) o.step_residuals.push_back({run.path, run.measured_step_s, simulated_step_s(run, fitted)});
  o.step_quality = fit_quality(o.step_residuals);
  return o;
}

}  // namespace pw
