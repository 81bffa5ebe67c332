// `pipewright simulate`: one scenario through the discrete-event simulator.
#include <filesystem>
#include <memory>
#include <optional>

#include "cli/commands.hpp"
#include "cli/cost_model_chain.hpp"
#include "cli/evaluation_report.hpp"
#include "cli/output_path.hpp"
#include "cli/scenario_options.hpp"
#include "cli/schedule_options.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "planner/plan_file.hpp"
#include "sim/chrome_trace.hpp"
#include "sim/event_recorder.hpp"
#include "sim/timeline.hpp"

namespace pw {
namespace {

struct SimulateOptions {
  ScenarioOptions scenario;
  bool json = false;
  bool timeline = false;
  int timeline_width = 100;
  std::string trace;
  std::string plan;  // a plan file (pipewright plan --out) instead of the scenario options
  ScheduleFileOptions files;
};

// The scenario options a plan file replaces; giving one with --plan would be ambiguous.
constexpr const char* kPlanFixes[] = {"--model", "--cluster", "--tp", "--pp", "--dp", "--vpp", "--microbatches",
                                      "--global-batch-size", "--micro-batch-size", "--seq-len", "--schedule",
                                      "--schedule-csv", "--max-pending", "--split", "--recompute",
                                      "--no-sequence-parallel", "--flash-attention", "--group-size"};

// The plan's profile again, read from where the plan recorded it; BadInput telling to pass --profile when it
// is gone or is now another machine's.
void add_plan_profile(CostModelChain& chain, const std::string& plan, const PlanProfile& recorded, const Model& model) {
  const std::string made_with = fmt::format("the profile '{}' ({} on {})", recorded.path, recorded.tool, recorded.machine);
  try {
    chain.add_profile_file(recorded.path, model, "");
  } catch (const Error& e) {
    throw_bad_input("--plan: {} was made with {}, which cannot be read now: {}; pass --profile FILE again", plan,
                    made_with, e.what());
  }
  const ProfileOrigin& now = *chain.profile_origin();
  if (now.tool != recorded.tool || now.machine != recorded.machine)
    throw_bad_input("--plan: {} was made with {}, but that file now holds {} on {}; pass --profile FILE again", plan,
                    made_with, now.tool, now.machine);
}

// The cost models: the plan's overrides, then the command line's; --profile, or else the plan's own profile.
CostModelChain cost_models(const SimulateOptions& o, const PlanDocument* doc, const Model& model) {
  if (!doc) return o.scenario.cost_models(model);
  std::vector<std::string> overrides = doc->cost_overrides;
  overrides.insert(overrides.end(), o.scenario.cost_params.begin(), o.scenario.cost_params.end());
  CostModelChain chain(overrides);
  if (!o.scenario.profile.empty())
    chain.add_profile_file(o.scenario.profile, model);
  else if (doc->profile)
    add_plan_profile(chain, o.plan, *doc->profile, model);
  add_calibration(chain, o.scenario.calibration);
  return chain;
}

// Observers the command needs at once.
class FanOut : public SimObserver {
 public:
  void add(SimObserver* o) {
    if (o) observers_.push_back(o);
  }
  void on_start(int ranks) override {
    for (auto* o : observers_) o->on_start(ranks);
  }
  void on_event(const SimEvent& e) override {
    for (auto* o : observers_) o->on_event(e);
  }
  void on_memory(int rank, double t, double bytes) override {
    for (auto* o : observers_) o->on_memory(rank, t, bytes);
  }
  void on_finish(double step) override {
    for (auto* o : observers_) o->on_finish(step);
  }
  bool empty() const { return observers_.empty(); }

 private:
  std::vector<SimObserver*> observers_;
};

void run_simulate(const SimulateOptions& o, std::ostream& out) {
  std::optional<PlanDocument> doc;
  if (!o.plan.empty()) doc = load_plan(o.plan);
  Scenario scenario = doc ? doc->scenario : o.scenario.to_scenario();
  o.files.apply(scenario);
  if (!o.trace.empty())
    check_output_path(o.trace, {o.scenario.model, o.scenario.cluster, o.plan, o.scenario.profile}, "--trace");
  const CostModelChain chain = cost_models(o, doc ? &*doc : nullptr, scenario.model);
  const CostModel& cost = chain.model();

  std::unique_ptr<ChromeTraceWriter> trace;
  std::unique_ptr<EventRecorder> recorder;
  FanOut observers;
  if (!o.trace.empty()) {
    trace = std::make_unique<ChromeTraceWriter>();
    observers.add(trace.get());
  }
  if (o.timeline) {
    recorder = std::make_unique<EventRecorder>();
    observers.add(recorder.get());
  }
  const Evaluation ev = evaluate(scenario, cost, observers.empty() ? nullptr : &observers);

  if (o.json) {
    nlohmann::ordered_json j = evaluation_to_json(ev);
    j["cost_model"] = chain.to_json(ev.scenario.model, {ev.scenario.workload});
    out << j.dump(2) << "\n";
  } else {
    print_evaluation(out, ev);
    if (chain.profiled()) {
      out << fmt::format("\ncost model: {}\n", chain.description());
      for (const std::string& line : chain.coverage_lines(ev.scenario.model, {ev.scenario.workload}))
        out << "  " << line << "\n";
    }
  }
  if (o.timeline) {
    out << "\n"
        << render_timeline(recorder->events(), ev.scenario.parallel.pp, ev.sim.simulated_time_s, o.timeline_width,
                           /*color=*/false);
  }
  if (trace) trace->write(o.trace);
  o.files.export_schedule(ev);
}

}  // namespace

CommandRunner add_simulate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "Simulate one training iteration of a configuration");
  auto opts = std::make_shared<SimulateOptions>();
  opts->scenario.add_to(*cmd, /*model_and_cluster_required=*/false);
  opts->scenario.add_profile_option(*cmd);
  cmd->add_option("--plan", opts->plan, "Simulate the plan in this file (pipewright plan --out) instead of --model, ...");
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of the table");
  cmd->add_option("--trace", opts->trace, "Write a Chrome trace / Perfetto JSON timeline to this file");
  cmd->add_flag("--timeline", opts->timeline, "Print the schedule's timeline in the terminal");
  cmd->add_option("--timeline-width", opts->timeline_width, "Columns of the terminal timeline")->check(CLI::Range(20, 1000));
  opts->files.add_to(*cmd, /*with_files=*/true);
  return [opts, cmd](std::ostream& out) {
    if (!opts->plan.empty())
      for (const char* name : kPlanFixes)
        if (cmd->get_option(name)->count() > 0)
          throw_bad_input("--plan: the plan file gives the scenario; drop {} (only --cost-param adds to a plan)", name);
    opts->files.prepare(*cmd, opts->scenario);
    run_simulate(*opts, out);
  };
}

}  // namespace pw
