// `pipewright calibrate`: fits the cost model to a profile and executor runs, prints each fit's parameters
// and quality and the held-out prediction error before and after, and writes calibration.json.
#include <algorithm>
#include <cmath>
#include <memory>

#include "calibrate/calibrate.hpp"
#include "cli/commands.hpp"
#include "cli/output_path.hpp"
#include "core/error.hpp"
#include "core/output_file.hpp"
#include "core/units.hpp"

namespace pw {
namespace {

struct CalibrateCommandOptions {
  CalibrateInputs inputs;
  std::string out;
  bool json = false;
};

std::string r2_text(double r2) { return std::isfinite(r2) ? fmt::format("{:.4f}", r2) : "-"; }

std::string quality_text(const FitQuality& q) {
  return fmt::format("{:>7} {:>8.2f}% {:>8.2f}% {:>6}", r2_text(q.r2), q.rms_error_pct, q.max_error_pct, q.points);
}

std::string error_text(double predicted, double measured) {
  if (!std::isfinite(predicted) || !(measured > 0)) return "-";
  return fmt::format("{:+.1f}%", (predicted - measured) / measured * 100);
}

std::string percent_or_dash(double pct) { return std::isfinite(pct) ? fmt::format("{:.1f}%", pct) : "-"; }

void print_layers(std::ostream& out, const Calibration& c) {
  out << "layers: time = overhead + FLOPs^e / rate + bytes / bandwidth (per layer kind and phase, layer_work()'s "
         "FLOPs and bytes)\n";
  out << fmt::format("  {:<10} {:<16} {:<23} {:>10} {:>14} {:>6} {:>12} {:>8} {:>7} {:>9} {:>9} {:>6}\n", "kind",
                     "phase", "form", "overhead", "rate", "e", "bandwidth", "extrap", "R^2", "rms err", "max err",
                     "points");
  for (const LayerFit& f : c.layers)
    out << fmt::format("  {:<10} {:<16} {:<23} {:>10} {:>14} {:>6.3f} {:>12} {:>8} {}\n", f.kind, phase_name(f.phase),
                       f.form, format_seconds(f.overhead_s), f.s_per_flop > 0 ? format_flops(1 / f.s_per_flop) : "-",
                       f.flop_exponent, f.s_per_byte > 0 ? format_rate(1 / f.s_per_byte) : "-",
                       percent_or_dash(f.extrapolation_error_pct), quality_text(f.quality));
  out << "  form: the terms chosen, as the one that best predicted the largest profiled size(s) from the smaller\n"
         "  ones (extrap: how far off that prediction was; '-' with fewer than 3 sizes); rate, bandwidth: '-' where\n"
         "  that term is not in the form or did not help (coefficient 0); rate is at the largest FLOP count fitted,\n"
         "  e the exponent of the FLOPs (1: a rate that does not depend on the size)\n\n";
}

void print_links(std::ostream& out, const Calibration& c) {
  out << "links: time = latency + size / bandwidth\n";
  if (!c.link) {
    out << "  none fitted: transfers use the cluster's links\n\n";
    return;
  }
  out << fmt::format("  {:<10} {:>10} {:>12} {:>7} {:>9} {:>9} {:>6}\n", "pair", "latency", "bandwidth", "R^2", "rms err",
                     "max err", "points");
  auto row = [&](const std::string& name, const LinkFit& l) {
    out << fmt::format("  {:<10} {:>10} {:>12} {}\n", name, format_seconds(l.latency_s), format_rate(l.bandwidth_bytes_per_s),
                       quality_text(l.quality));
  };
  row("pooled", *c.link);
  for (const LinkFit& l : c.link_pairs) row(fmt::format("{} -> {}", l.src, l.dst), l);
  out << "  the pooled fit is what the calibrated model uses for every transfer inside a node\n\n";
  if (c.collectives.empty()) {
    out << "collectives: none measured\n\n";
    return;
  }
  out << "collectives: bus bandwidth / link bandwidth\n";
  for (const CollectiveFit& f : c.collectives)
    out << fmt::format("  {:<16} {:>6.3f} {}\n", collective_name(f.kind), f.efficiency, quality_text(f.quality));
  out << "\n";
}

void print_overheads(std::ostream& out, const Calibration& c) {
  if (c.optimizer_s_per_parameter > 0)
    out << fmt::format("optimizer: {} per million parameters (from the profile)\n\n",
                       format_seconds(c.optimizer_s_per_parameter * 1e6));
  const RunOverheads& o = c.overheads;
  if (!o.fitted) {
    out << "run overheads: none fitted (no runs given: --runs run.json ...)\n\n";
    return;
  }
  int fitted = 0;
  for (const RunSource& r : c.runs) fitted += r.held_out ? 0 : 1;
  out << fmt::format("run overheads, fitted on {} run{}:\n", fitted, fitted == 1 ? "" : "s");
  out << fmt::format("  {:<18} {:>10}  x the layer times, inside a run\n", "compute scale", fmt::format("{:.4f}", o.compute_scale));
  out << fmt::format("  {:<18} {:>10}  per phase of a compute action (F, B, W; BW counts 2)\n", "dispatch",
                     format_seconds(o.dispatch_s));
  out << fmt::format("  {:<18} {:>10}  per point-to-point transfer, added to the link latency\n", "transfer",
                     format_seconds(o.transfer_s));
  out << fmt::format("  {:<18} {:>10}  compute runs 1 + this times as long beside a transfer (from traces)\n",
                     "transfer slowdown", fmt::format("{:.4f}", o.transfer_slowdown));
  out << fmt::format("  {:<18} {}\n", "compute fit", quality_text(o.compute_quality));
  out << fmt::format("  {:<18} {}\n\n", "step times", quality_text(o.step_quality));
}

void print_held_out(std::ostream& out, const Calibration& c) {
  if (c.held_out_layers.empty() && c.held_out_runs.empty()) {
    out << "held out: nothing (--holdout 0); give --holdout 0.25 to measure the prediction error on data left out\n";
    return;
  }
  out << "held out (left out of the fit): prediction error, predicted vs measured\n";
  if (!c.held_out_layers.empty()) {
    const std::string analytic = c.analytic_gpu.empty() ? "analytic" : "analytic (" + c.analytic_gpu + ")";
    out << fmt::format("  {:<34} {:>10} {:>22} {:>11}\n", "layer", "measured", analytic, "calibrated");
    for (const HeldOutPoint& p : c.held_out_layers)
      out << fmt::format("  {:<34} {:>10} {:>22} {:>11}\n", p.what, format_seconds(p.measured_s),
                         error_text(p.analytic_s, p.measured_s), error_text(p.calibrated_s, p.measured_s));
    out << fmt::format("  {:<34} {:>10} {:>22} {:>11}\n", "median |error|", "",
                       percent_or_dash(median_abs_error_pct(c.held_out_layers, &HeldOutPoint::analytic_s)),
                       percent_or_dash(median_abs_error_pct(c.held_out_layers, &HeldOutPoint::calibrated_s)));
  }
  if (!c.held_out_runs.empty()) {
    size_t width = 34;
    for (const HeldOutPoint& p : c.held_out_runs) width = std::max(width, p.what.size());
    out << fmt::format("  {:<{}} {:>10} {:>10} {:>11} {:>11}\n", "run (step time)", width, "measured", "analytic", "profile",
                       "calibrated");
    for (const HeldOutPoint& p : c.held_out_runs)
      out << fmt::format("  {:<{}} {:>10} {:>10} {:>11} {:>11}\n", p.what, width, format_seconds(p.measured_s),
                         error_text(p.analytic_s, p.measured_s), error_text(p.profiled_s, p.measured_s),
                         error_text(p.calibrated_s, p.measured_s));
    out << fmt::format("  {:<{}} {:>10} {:>10} {:>11} {:>11}\n", "median |error|", width, "",
                       percent_or_dash(median_abs_error_pct(c.held_out_runs, &HeldOutPoint::analytic_s)),
                       percent_or_dash(median_abs_error_pct(c.held_out_runs, &HeldOutPoint::profiled_s)),
                       percent_or_dash(median_abs_error_pct(c.held_out_runs, &HeldOutPoint::calibrated_s)));
  }
}

void print_fit_check(std::ostream& out, const FitCheck& check) {
  if (!check.poor()) {
    out << fmt::format("\nfit check: good (step-time R^2 {}; held-out runs {} where the profile alone is {})\n",
                       r2_text(check.step_r2), percent_or_dash(check.held_out_error_pct),
                       percent_or_dash(check.profile_held_out_error_pct));
    return;
  }
  out << fmt::format("\nfit check: POOR, written only because of --accept-poor-fit: {}\n", poor_fit_text(check));
}

void print_calibration(std::ostream& out, const Calibration& c) {
  int held = 0;
  for (const RunSource& r : c.runs) held += r.held_out ? 1 : 0;
  out << fmt::format("calibration for {} ({}, {} cores) from {} and {} run{}{}\n\n", c.machine.device, c.machine.backend,
                     c.machine.cores, c.profile_path, c.runs.size(), c.runs.size() == 1 ? "" : "s",
                     held ? fmt::format(" ({} held out)", held) : "");
  print_layers(out, c);
  print_links(out, c);
  print_overheads(out, c);
  print_held_out(out, c);
  print_fit_check(out, c.fit_check);
  for (const std::string& w : c.warnings) out << "warning: " << w << "\n";
}

void run_calibrate(const CalibrateCommandOptions& o, std::ostream& out) {
  std::vector<OptionPath> inputs{{"--profile", o.inputs.profile}, {"--cluster", o.inputs.cluster}};
  for (const std::string& run : o.inputs.runs) inputs.push_back({"--runs", run});
  for (const std::string& trace : o.inputs.traces) inputs.push_back({"--traces", trace});
  check_outputs({{"--out", o.out}}, inputs);
  const Calibration c = calibrate(o.inputs);
  const std::string text = calibration_to_json_text(c);
  write_output_file(o.out, text);
  if (o.json) {
    out << text;
    return;
  }
  print_calibration(out, c);
  out << fmt::format("\nwrote {}\n", o.out);
}

}  // namespace

CommandRunner add_calibrate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("calibrate", "Fit the cost model to a profile and executor runs; write calibration.json");
  auto opts = std::make_shared<CalibrateCommandOptions>();
  cmd->add_option("--profile", opts->inputs.profile, "Profile JSON from `pipewright profile` (several micro-batch sizes)")
      ->required();
  cmd->add_option("--runs", opts->inputs.runs, "`pipewright run --json` outputs to fit the run overheads on");
  cmd->add_option("--traces", opts->inputs.traces, "Their `run --trace` files, one per run in the same order (optional)");
  cmd->add_option("--holdout", opts->inputs.holdout,
                  "Fraction of micro-batch shapes (the largest) and runs (the last) left out of the fit and predicted")
      ->capture_default_str();
  cmd->add_option("--cluster", opts->inputs.cluster,
                  "Cluster whose GPU the analytic defaults are evaluated on for the held-out layers (default: the first run's)");
  cmd->add_flag("--accept-poor-fit", opts->inputs.accept_poor_fit,
                "Write a fit whose step-time R^2 is negative or whose held-out runs are predicted worse than by the "
                "profile alone (flagged in the file) instead of refusing it");
  cmd->add_option("--out", opts->out, "Write the calibration JSON here")->required();
  cmd->add_flag("--json", opts->json, "Print the calibration JSON instead of the tables");
  return [opts](std::ostream& out) { run_calibrate(*opts, out); };
}

}  // namespace pw
