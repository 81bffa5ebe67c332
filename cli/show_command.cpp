// `pipewright show`: the schedule as a picture, one row per rank on the simulated time axis, as SVG
// (--svg FILE) and in the terminal (--timeline, the default). The schedule comes from simulate's
// options, a plan file (--plan) or a trace written by simulate or run (--trace).
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "cli/commands.hpp"
#include "cli/output_path.hpp"
#include "cli/scenario_options.hpp"
#include "cli/schedule_options.hpp"
#include "cli/work_bounds.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/output_file.hpp"
#include "core/units.hpp"
#include "planner/plan_file.hpp"
#include "schedules/svg.hpp"
#include "sim/event_recorder.hpp"
#include "sim/timeline.hpp"

namespace pw {
namespace {

struct ShowOptions {
  ScenarioOptions scenario;
  ScheduleFileOptions files;
  std::string plan;
  std::string trace;
  std::string svg;
  std::string title;
  bool timeline = false;
  int timeline_width = 100;
  int svg_width = 1200;
  bool allow_large = false;
};

// What is drawn: the compute events, the placement that colours them, the time they span.
struct Picture {
  std::vector<SimEvent> events;
  Placement placement;
  double span_s = 0;
  std::string title;
  std::string summary;  // one line above the terminal view
};

Picture from_simulation(const ShowOptions& o) {
  AnalyticCostParams params;
  Scenario scenario;
  if (o.plan.empty()) {
    scenario = o.scenario.to_scenario();
    for (const std::string& assignment : o.scenario.cost_params) set_param(params, assignment);
  } else {
    const PlanDocument doc = load_plan(o.plan);
    scenario = doc.scenario;
    for (const std::string& assignment : doc.cost_overrides) set_param(params, assignment);
    for (const std::string& assignment : o.scenario.cost_params) set_param(params, assignment);
  }
  o.files.apply(scenario);
  SimulationSource source = simulation_source(o.scenario, o.files.schedule_csv);
  if (!o.plan.empty()) source.schedule_file = o.plan;
  check_work_unless_allowed("show", {simulation_estimate(resolve(scenario), source, {.timeline = true})}, o.allow_large);
  EventRecorder recorder;
  const Evaluation ev = evaluate(scenario, AnalyticCostModel(params), &recorder);
  o.files.export_schedule(ev);
  Picture p;
  for (const SimEvent& e : recorder.events())
    if (e.lane == Lane::Compute) p.events.push_back(e);
  p.placement = ev.schedule.placement;
  p.span_s = ev.sim.simulated_time_s;
  const Scenario& s = ev.scenario;
  p.title = o.title.empty() ? fmt::format("{}: {} on {}, pp {}, {} micro-batches", s.schedule, s.model.name,
                                          s.cluster.name, s.parallel.pp, s.parallel.microbatches)
                            : o.title;
  p.summary = fmt::format(
      "{}: step time {}, bubble {}{}", s.schedule, format_seconds(ev.sim.step_time_s),
      format_percent(ev.sim.bubble_fraction),
      ev.sim.iterations > 1 ? fmt::format(" (steady state of {} iterations)", ev.sim.iterations) : std::string());
  return p;
}

// The compute slices of a Chrome trace in pipewright's schema (sim/chrome_trace.hpp): pid = rank,
// category "compute", name = the action's text, ts and dur in microseconds.
Picture from_trace(const ShowOptions& o) {
  const nlohmann::json doc = parse_json_text(read_text_file(o.trace, "--trace: trace"), o.trace);
  const nlohmann::json* events = doc.is_object() && doc.contains("traceEvents") ? &doc["traceEvents"] : nullptr;
  if (!events || !events->is_array())
    throw_bad_input("--trace: {} has no traceEvents list; give a trace written by pipewright simulate or run --trace",
                    o.trace);
  Picture p;
  std::vector<std::vector<Action>> lists;
  for (const nlohmann::json& e : *events) {
    if (!e.is_object() || e.value("ph", "") != "X" || e.value("cat", "") != "compute") continue;
    const auto number = [&](const char* key) {
      const auto it = e.find(key);
      if (it == e.end() || !it->is_number())
        throw_bad_input("--trace: {}: compute slice '{}' has no numeric {}", o.trace, e.value("name", "?"), key);
      return it->get<double>();
    };
    const int rank = static_cast<int>(number("pid"));
    if (rank < 0) throw_bad_input("--trace: {}: compute slice on pid {}; pids are pipeline ranks", o.trace, rank);
    Action a;
    try {
      a = action_from_text(e.value("name", ""));
    } catch (const Error& err) {
      throw_bad_input("--trace: {}: {}", o.trace, err.what());
    }
    SimEvent ev;
    ev.rank = rank;
    ev.action = a;
    ev.start_s = number("ts") / 1e6;
    ev.end_s = ev.start_s + number("dur") / 1e6;
    p.events.push_back(ev);
    if (static_cast<int>(lists.size()) <= rank) lists.resize(static_cast<size_t>(rank) + 1);
    lists[static_cast<size_t>(rank)].push_back(a);
    p.span_s = std::max(p.span_s, ev.end_s);
  }
  if (p.events.empty())
    throw_bad_input("--trace: {} has no compute slices; give a trace written by pipewright simulate or run --trace",
                    o.trace);
  p.placement = detect_placement(lists, o.trace);
  p.title = o.title.empty() ? std::filesystem::path(o.trace).filename().string() : o.title;
  p.summary = fmt::format("{}: {} compute slices over {}", o.trace, p.events.size(), format_seconds(p.span_s));
  return p;
}

void run_show(const ShowOptions& o, std::ostream& out) {
  const Picture p = o.trace.empty() ? from_simulation(o) : from_trace(o);
  if (!o.svg.empty()) {
    std::vector<TimedAction> boxes;
    for (const SimEvent& e : p.events) boxes.push_back(TimedAction{e.rank, e.action, e.start_s, e.end_s});
    write_output_file(o.svg, schedule_svg(boxes, p.placement, p.span_s, SvgOptions{p.title, o.svg_width}));
  }
  out << p.summary << "\n";
  if (o.timeline || o.svg.empty())
    out << "\n" << render_timeline(p.events, p.placement.ranks, p.span_s, o.timeline_width, /*color=*/false);
  if (!o.svg.empty()) out << "wrote " << o.svg << "\n";
}

}  // namespace

CommandRunner add_show_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("show", "Draw a schedule on its simulated time axis (SVG or terminal)");
  auto opts = std::make_shared<ShowOptions>();
  opts->scenario.add_to(*cmd, /*model_and_cluster_required=*/false);
  opts->files.add_to(*cmd, /*with_files=*/true);
  cmd->add_option("--plan", opts->plan, "Show the plan in this file (pipewright plan --out)");
  cmd->add_option("--trace", opts->trace, "Show a trace written by pipewright simulate --trace or run --trace");
  cmd->add_option("--svg", opts->svg, "Write the picture as SVG to this file");
  cmd->add_option("--svg-width", opts->svg_width, "Width of the SVG in pixels")->check(CLI::Range(200, 20000));
  cmd->add_option("--title", opts->title, "Title above the SVG picture");
  cmd->add_flag("--timeline", opts->timeline, "Print the terminal timeline too (the default without --svg)");
  add_allow_large_flag(*cmd, opts->allow_large);
  cmd->add_option("--timeline-width", opts->timeline_width, "Columns of the terminal timeline")
      ->check(CLI::Range(20, 1000));
  return [opts, cmd](std::ostream& out) {
    check_outputs({{"--svg", opts->svg}, opts->files.output_path()},
                  {{"--model", opts->scenario.model}, {"--cluster", opts->scenario.cluster}, {"--plan", opts->plan},
                   {"--trace", opts->trace}, opts->files.input_path()});
    const bool given_trace = !opts->trace.empty();
    if (given_trace && !opts->plan.empty()) throw_bad_input("--trace: give a trace or a plan, not both; drop --plan");
    if (given_trace && !opts->files.schedule_csv.empty())
      throw_bad_input("--trace: the trace gives the schedule; drop --schedule-csv");
    if (given_trace || !opts->plan.empty()) {
      for (const char* name : {"--model", "--cluster", "--schedule", "--pp", "--microbatches"})
        if (cmd->get_option(name)->count() > 0)
          throw_bad_input("{}: the {} gives the schedule; drop {}", given_trace ? "--trace" : "--plan",
                          given_trace ? "trace" : "plan file", name);
    }
    if (!given_trace) opts->files.prepare(*cmd, opts->scenario);
    run_show(*opts, out);
  };
}

}  // namespace pw
