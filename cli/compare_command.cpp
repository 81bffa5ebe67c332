// `pipewright compare`: several schedules on one configuration, side by side in one table.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/cost_model_chain.hpp"
#include "cli/scenario_options.hpp"
#include "cli/schedule_options.hpp"
#include "cli/work_bounds.hpp"
#include "core/error.hpp"
#include "core/units.hpp"
#include "core/version.hpp"

namespace pw {
namespace {

struct CompareOptions {
  ScenarioOptions scenario;
  ScheduleFileOptions files;
  std::string schedules;
  bool json = false;
  bool allow_large = false;
};

// One schedule's outcome: its metrics, or why it cannot run this configuration.
struct Row {
  std::string schedule;
  std::string error;  // empty when it ran
  ErrorKind error_kind = ErrorKind::BadInput;
  Evaluation ev;
  double p2p_bytes = 0;  // sent by all ranks of one pipeline per iteration
};

std::vector<std::string> parse_list(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty())
      throw_bad_input("--schedules: an empty name in '{}'; give names separated by commas, such as 1f1b,zb-h1,zb-v",
                      text);
    const std::vector<std::string> known = schedule_names();
    if (std::find(known.begin(), known.end(), item) == known.end())
      throw_bad_input("--schedules: unknown schedule '{}'; known: {}", item, fmt::join(known, ", "));
    out.push_back(item);
    pos = comma + 1;
  }
  return out;
}

// --vpp applies to the schedules that take it (interleaved, bfs; 2 when --vpp is 1, their least); the
// others run their own chunk count.
Scenario for_schedule(Scenario base, const std::string& name) {
  base.schedule = name;
  const bool takes_vpp = name == "interleaved" || name == "bfs";
  if (!takes_vpp) base.parallel.vpp = 1;
  if (takes_vpp && base.parallel.vpp == 1) base.parallel.vpp = 2;
  if (name != "interleaved") base.group_size = 0;
  if (name != "zb-h1" && name != "zb-h2") base.max_pending = 0;
  return base;
}

// `cost_lines`: what predicted the rows, when a profile took part (empty otherwise).
std::vector<Row> evaluate_all(const CompareOptions& o, std::vector<std::string>& cost_lines) {
  Scenario base = o.scenario.to_scenario();
  o.files.apply(base);
  const CostModelChain chain = o.scenario.cost_models(base.model);
  const CostModel& cost = chain.model();
  if (chain.profiled()) {
    cost_lines.push_back("cost model: " + chain.description());
    for (const std::string& line : chain.coverage_lines(base.model, {base.workload})) cost_lines.push_back("  " + line);
  }
  std::vector<WorkEstimate> work;
  for (const std::string& name : parse_list(o.schedules)) {
    try {
      work.push_back(simulation_estimate(resolve(for_schedule(base, name)), simulation_source(o.scenario)));
    } catch (const Error&) {
      // Its row says why it cannot run; it takes nothing.
    }
  }
  check_work_unless_allowed("compare", work, o.allow_large);
  std::vector<Row> rows;
  for (const std::string& name : parse_list(o.schedules)) {
    Row row;
    row.schedule = name;
    try {
      row.ev = evaluate(for_schedule(base, name), cost);
      for (const RankStats& r : row.ev.sim.ranks) row.p2p_bytes += r.p2p_bytes_sent;
    } catch (const Error& e) {
      // A schedule that cannot run this configuration (its micro-batch or chunk constraints, memory
      // it cannot keep within) is one result of the comparison, not a failure of the command.
      row.error = e.what();
      row.error_kind = e.kind();
    }
    rows.push_back(std::move(row));
  }
  // The same refusal from every schedule is the configuration's, not a schedule's (--seq-len -1): the
  // command's error, with its exit code.
  const bool one_refusal = std::all_of(rows.begin(), rows.end(), [&](const Row& r) {
    return !r.error.empty() && r.error == rows.front().error;
  });
  if (one_refusal) throw Error(rows.front().error_kind, rows.front().error);
  return rows;
}

// Per rank, the peak memory with one decimal in one unit (GB, or MB when all are below a GB): "a/b/c GB".
std::string per_rank_memory(const SimResult& sim) {
  double most = 0;
  for (const RankStats& r : sim.ranks) most = std::max(most, r.peak_memory_bytes);
  const bool gb = most >= 1e9;
  std::string out;
  for (const RankStats& r : sim.ranks)
    out += fmt::format("{}{:.1f}", out.empty() ? "" : "/", r.peak_memory_bytes / (gb ? 1e9 : 1e6));
  return out + (gb ? " GB" : " MB");
}

void print_table(std::ostream& out, const std::vector<Row>& rows) {
  const Row* any = nullptr;
  for (const Row& r : rows)
    if (r.error.empty()) any = &r;
  if (any) {
    const Scenario& s = any->ev.scenario;
    const double limit = any->ev.metrics.memory_limit_bytes;
    out << fmt::format(
        "{} on {}: tp {}, pp {}, dp {}, {} micro-batches of {}{}\n\n", s.model.name, s.cluster.name, s.parallel.tp,
        s.parallel.pp, s.parallel.dp, s.parallel.microbatches, s.workload.micro_batch_size,
        std::isinf(limit) ? std::string(", no memory limit") : fmt::format(", {} per GPU", s.cluster.memory_limit_text(limit)));
  }
  size_t name_width = std::string("schedule").size();
  for (const Row& r : rows) name_width = std::max(name_width, r.schedule.size());
  out << fmt::format("{:<{}}  {:>10}  {:>7}  {:>10}  {:<32}  {:>10}  {}\n", "schedule", name_width, "step time",
                     "bubble", "peak mem", "peak mem per rank", "p2p/iter", "fits");
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      out << fmt::format("{:<{}}  cannot run: {}\n", r.schedule, name_width, r.error.substr(0, r.error.find('\n')));
      continue;
    }
    const Metrics& m = r.ev.metrics;
    out << fmt::format("{:<{}}  {:>10}  {:>7}  {:>10}  {:<32}  {:>10}  {}\n", r.schedule, name_width,
                       format_seconds(m.step_time_s), format_percent(m.bubble_fraction),
                       format_bytes(m.peak_memory_bytes), per_rank_memory(r.ev.sim), format_bytes(r.p2p_bytes),
                       m.overflows.empty() ? "yes" : "no");
  }
}

nlohmann::json rows_to_json(const std::vector<Row>& rows) {
  using nlohmann::json;
  json list = json::array();
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      list.push_back({{"schedule", r.schedule}, {"error", r.error}});
      continue;
    }
    const Metrics& m = r.ev.metrics;
    json ranks = json::array();
    for (const RankStats& s : r.ev.sim.ranks)
      ranks.push_back({{"rank", s.rank},
                       {"peak_memory_bytes", s.peak_memory_bytes},
                       {"busy_s", s.busy_s},
                       {"p2p_bytes_sent", s.p2p_bytes_sent}});
    list.push_back({{"schedule", r.schedule},
                    {"vpp", r.ev.scenario.parallel.vpp},
                    {"step_time_s", m.step_time_s},
                    {"bubble_fraction", m.bubble_fraction},
                    {"throughput_tokens_per_s", m.throughput_tokens_per_s},
                    {"peak_memory_bytes", m.peak_memory_bytes},
                    {"p2p_bytes_per_iteration", r.p2p_bytes},
                    {"fits", m.overflows.empty()},
                    {"ranks", ranks}});
  }
  return json{{"pipewright_version", kVersion}, {"schedules", list}};
}

}  // namespace

CommandRunner add_compare_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("compare", "Simulate several schedules on one configuration and compare them");
  auto opts = std::make_shared<CompareOptions>();
  opts->scenario.add_to(*cmd);
  opts->scenario.add_profile_option(*cmd);
  opts->files.add_to(*cmd, /*with_files=*/false);
  cmd->add_option("--schedules", opts->schedules, "Schedules to compare, separated by commas, e.g. 1f1b,zb-h1,zb-v")
      ->required();
  cmd->add_flag("--json", opts->json, "Print one JSON object instead of the table");
  add_allow_large_flag(*cmd, opts->allow_large);
  return [opts, cmd](std::ostream& out) {
    if (cmd->get_option("--schedule")->count() > 0)
      throw_bad_input("--schedule: compare runs the list in --schedules; drop --schedule");
    std::vector<std::string> cost_lines;
    const std::vector<Row> rows = evaluate_all(*opts, cost_lines);
    if (opts->json) {
      out << rows_to_json(rows).dump(2) << "\n";
    } else {
      print_table(out, rows);
      if (!cost_lines.empty()) out << "\n";
      for (const std::string& line : cost_lines) out << line << "\n";
    }
  };
}

}  // namespace pw
