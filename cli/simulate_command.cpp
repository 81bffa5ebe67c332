// `pipewright simulate`: one scenario through the discrete-event simulator.
#include <filesystem>
#include <memory>

#include "cli/commands.hpp"
#include "cli/evaluation_report.hpp"
#include "cli/scenario_options.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
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
};

// An output path must not be one of the user's inputs.
void check_output_path(const std::string& out, const ScenarioOptions& o, const char* option) {
  namespace fs = std::filesystem;
  for (const std::string& in : {o.model, o.cluster}) {
    std::error_code ec;
    if (fs::exists(in, ec) && fs::exists(out, ec) && fs::equivalent(in, out, ec))
      throw_bad_input("{}: '{}' is an input of this command; write the output to another file", option, out);
  }
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
  const Scenario scenario = o.scenario.to_scenario();
  if (!o.trace.empty()) check_output_path(o.trace, o.scenario, "--trace");
  const AnalyticCostModel cost;

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
    out << evaluation_to_json(ev).dump(2) << "\n";
  } else {
    print_evaluation(out, ev);
  }
  if (o.timeline) {
    out << "\n"
        << render_timeline(recorder->events(), ev.scenario.parallel.pp, ev.sim.step_time_s, o.timeline_width,
                           /*color=*/false);
  }
  if (trace) trace->write(o.trace);
}

}  // namespace

CommandRunner add_simulate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("simulate", "Simulate one training iteration of a configuration");
  auto opts = std::make_shared<SimulateOptions>();
  opts->scenario.add_to(*cmd);
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of the table");
  cmd->add_option("--trace", opts->trace, "Write a Chrome trace / Perfetto JSON timeline to this file");
  cmd->add_flag("--timeline", opts->timeline, "Print the schedule's timeline in the terminal");
  cmd->add_option("--timeline-width", opts->timeline_width, "Columns of the terminal timeline")->check(CLI::Range(20, 1000));
  return [opts](std::ostream& out) { run_simulate(*opts, out); };
}

}  // namespace pw
