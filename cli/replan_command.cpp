// `pipewright replan --plan plan.json --failed-nodes 3,17`: the best plan on the nodes a running plan keeps
// when some of its nodes fail, with the same global batch, and what the run must change.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <memory>

#include "cli/commands.hpp"
#include "cli/failure_options.hpp"
#include "cli/failure_output.hpp"
#include "cli/output_path.hpp"
#include "cli/scenario_options.hpp"
#include "cli/work_bounds.hpp"
#include "core/error.hpp"
#include "core/failed_nodes.hpp"
#include "core/output_file.hpp"
#include "core/units.hpp"
#include "planner/failure_report.hpp"
#include "planner/parallel_for.hpp"
#include "planner/search_estimate.hpp"
#include "planner/plan_file.hpp"
#include "sim/scenario.hpp"

namespace pw {
namespace {

struct ReplanOptions {
  ScenarioOptions scenario;  // --plan only
  std::vector<int> failed_nodes;
  std::string batch_tolerance;
  int top = 5;
  int threads = 0;
  bool json = false;
  bool allow_large = false;
  std::string out_path;
};

// "3, 17" (at most a few listed, then how many more).
std::string node_list(const std::vector<int>& nodes) {
  std::string out;
  for (size_t i = 0; i < nodes.size() && i < 8; ++i) out += (i ? ", " : "") + std::to_string(nodes[i]);
  if (nodes.size() > 8) out += fmt::format(" and {} more", nodes.size() - 8);
  return out;
}

void run_replan(const ReplanOptions& o, std::ostream& out) {
  if (o.scenario.plan.empty()) throw_bad_input("--plan: give the plan file the run was started from (pipewright plan --out)");
  if (o.failed_nodes.empty()) throw_bad_input("--failed-nodes: list the failed nodes, e.g. --failed-nodes 3,17");
  check_top(o.top);
  const double batch_tolerance = batch_tolerance_of(o.batch_tolerance);
  if (o.threads < 0) throw_bad_input("--threads: must be 0 (all cores) or more, got {}", o.threads);
  const std::optional<PlanDocument> doc = o.scenario.plan_document();
  // The running job's plan is an input: a replan written over it would lose what the job runs.
  std::vector<OptionPath> inputs = o.scenario.input_paths();
  for (const OptionPath& recorded : o.scenario.plan_input_paths(doc)) inputs.push_back(recorded);
  check_outputs({{"--out", o.out_path}}, inputs);
  const Scenario& running = doc->scenario;
  const CostModelChain chain = o.scenario.cost_models(running.model, doc);
  const CostModel& cost = chain.model();

  const Evaluation now = evaluate(running, cost);
  const Plan before{candidate_of(now.scenario), now, {}};
  const int gpus = now.scenario.parallel.gpus();
  const Cluster& cluster = now.scenario.cluster;
  const int per = cluster.ideal ? gpus : cluster.gpus_per_node;
  const int used_nodes = (gpus + per - 1) / per;
  // The search builds each configuration's schedule: the plan's written action lists are for its own.
  Scenario left = now.scenario;
  left.imported_schedule.reset();
  left.cluster = without_nodes(cluster, used_nodes, o.failed_nodes);
  int gpus_left = gpus;
  for (int n : o.failed_nodes) gpus_left -= std::min(per, gpus - n * per);

  SearchSpace space;
  space.gpus = gpus_left;
  // As plan searches by default: no pipeline deeper than the deepest published ones.
  space.min_blocks_per_rank = kMinBlocksPerRank;
  // The search replan runs (any count of GPUs up to those left), estimated first; an empty space is its verdict.
  SearchSpace searched = space;
  searched.up_to_gpus = true;
  std::vector<WorkEstimate> work;
  try {
    work = search_space_estimate(left, searched, thread_count(o.threads));
    // replan has no space options of its own: plan has them.
    for (WorkEstimate& part : work)
      part.fix = fmt::format("plan the {} GPUs left in a narrower space (pipewright plan --gpus {} with --vpp, --pp or "
                             "--schedules)", gpus_left, gpus_left);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;
  }
  check_work_unless_allowed("replan", work, o.allow_large);
  SearchOptions so;
  so.top = o.top;
  so.threads = o.threads;
  so.time_limit_s = o.allow_large ? 0 : kWorkSecondsLimit;
  const AfterFailure after = replan(left, space, gpus_left, cost, so, before, gpus, batch_tolerance);

  const std::string heading =
      fmt::format("node{} {} of {} failed, {} GPUs are left", o.failed_nodes.size() == 1 ? "" : "s",
                  node_list(o.failed_nodes), used_nodes, gpus_left);
  if (o.json) {
    nlohmann::ordered_json j = {{"plan", o.scenario.plan},
                                {"failed_nodes", o.failed_nodes},
                                {"before", {{"gpus", gpus},
                                            {"step_time_s", now.metrics.step_time_s},
                                            {"throughput_tokens_per_s", now.metrics.throughput_tokens_per_s}}},
                                {"after", after_failure_json(after, cost, o.threads)}};
    out << j.dump(2) << "\n";
  } else {
    out << fmt::format("{}: {} on {} GPUs ({} nodes): step {}, {} tokens/s\n", o.scenario.plan, describe(before.config), gpus,
                       used_nodes, format_seconds(now.metrics.step_time_s),
                       format_short(now.metrics.throughput_tokens_per_s));
    print_after_failure(out, heading, after, cost, o.threads);
  }
  // The first way on is what the run takes next.
  if (!o.out_path.empty() && after.ways.front().plan) {
    write_output_file(o.out_path, plan_to_json_text(after.ways.front().plan->evaluation, PlanExtras{}));
    if (!o.json) out << fmt::format("\nwrote the first way on ({}) to {}\n", to_string(after.ways.front().way), o.out_path);
  }
}

}  // namespace

CommandRunner add_replan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("replan", "Re-plan a running plan on the nodes left when some of its nodes fail");
  auto o = std::make_shared<ReplanOptions>();
  o->scenario.add_plan_option(*cmd, "Re-plan");
  cmd->add_option("--failed-nodes", o->failed_nodes, "The failed nodes, comma-separated indices among the plan's nodes")
      ->delimiter(',');
  add_batch_tolerance_option(*cmd, o->batch_tolerance);
  cmd->add_option("--top", o->top, "Plans to print")->capture_default_str();
  cmd->add_option("--threads", o->threads, "Threads for the search (default: all cores)");
  cmd->add_flag("--json", o->json, "Print JSON instead of the table");
  cmd->add_option("--out", o->out_path, "Write the first way on after the failure (the most tokens/s) to this file");
  add_allow_large_flag(*cmd, o->allow_large);
  return [o](std::ostream& out) { run_replan(*o, out); };
}

}  // namespace pw
