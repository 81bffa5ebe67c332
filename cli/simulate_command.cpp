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
#include "cli/work_bounds.hpp"
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
  ScheduleFileOptions files;
  bool allow_large = false;
};

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

std::vector<OptionPath> output_paths(const SimulateOptions& o) { return {{"--trace", o.trace}, o.files.output_path()}; }

void run_simulate(const SimulateOptions& o, std::ostream& out) {
  const std::optional<PlanDocument> doc = o.scenario.plan_document();
  check_outputs(output_paths(o), o.scenario.plan_input_paths(doc));
  Scenario scenario = o.scenario.scenario_of(doc);
  o.files.apply(scenario);
  check_work_unless_allowed("simulate",
                            {simulation_estimate(resolve(scenario), simulation_source(o.scenario, o.files.schedule_csv),
                                                 {o.timeline, !o.trace.empty()})},
                            o.allow_large);
  const CostModelChain chain = o.scenario.cost_models(scenario.model, doc);
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
    if (chain.profiled() || chain.tables()) {
      out << fmt::format("\ncost model: {}\n", chain.description());
      for (const std::string& line : chain.table_lines()) out << "  " << line << "\n";
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
  opts->scenario.add_plan_option(*cmd, "Simulate");
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of the table");
  cmd->add_option("--trace", opts->trace, "Write a Chrome trace / Perfetto JSON timeline to this file");
  cmd->add_flag("--timeline", opts->timeline, "Print the schedule's timeline in the terminal");
  cmd->add_option("--timeline-width", opts->timeline_width, "Columns of the terminal timeline")->check(CLI::Range(20, 1000));
  opts->files.add_to(*cmd, /*with_files=*/true);
  add_allow_large_flag(*cmd, opts->allow_large);
  return [opts, cmd](std::ostream& out) {
    std::vector<OptionPath> inputs = opts->scenario.input_paths();
    inputs.push_back(opts->files.input_path());
    check_outputs(output_paths(*opts), inputs);
    opts->scenario.check_plan_alone(*cmd);
    opts->files.prepare(*cmd, opts->scenario);
    run_simulate(*opts, out);
  };
}

}  // namespace pw
