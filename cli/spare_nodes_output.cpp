#include "cli/spare_nodes_output.hpp"

#include <fmt/format.h>

#include "cli/train_cost_options.hpp"
#include "core/units.hpp"

namespace pw {

namespace {

double template_throughput(const SpareTemplate& t) { return t.plan ? t.plan->evaluation.metrics.throughput_tokens_per_s : 0.0; }

std::string template_text(const SpareTemplate& t) {
  if (!t.plan) return "nothing fits";
  const Candidate& c = t.plan->config;
  return fmt::format("pp={}, dp={}, vpp={}, mbs {}, {}, batch {}{}", c.pp, c.dp, c.vpp, c.micro_batch_size, c.schedule,
                     t.plan->evaluation.scenario.global_batch_size, t.way ? fmt::format(" ({})", to_string(*t.way)) : " (plan 1)");
}

}  // namespace

std::vector<SpareRow> spare_rows(const SparePool& pool, int max_spares, const std::vector<SpareTemplate>& templates,
                                 const TrainingRunSpec& spec) {
  std::vector<double> throughput;
  for (const SpareTemplate& t : templates) throughput.push_back(template_throughput(t));
  std::vector<SpareRow> rows;
  for (int s = 0; s <= max_spares; ++s) {
    SpareRow r;
    r.spares = s;
    r.gpus = (pool.run_nodes + s) * pool.gpus_per_node;
    r.outcome = with_spares(pool, s, throughput);
    if (r.outcome.expected_tokens_per_s > 0) {
      // One computation for every time to train: the main table's at the plan's throughput, these at the
      // expected one.
      r.run = training_run_cost(spec, r.outcome.expected_tokens_per_s);
      // Spares are paid for while they wait.
      r.run.gpu_hours = r.run.wall_s / 3600 * r.gpus;
      if (spec.price_per_gpu_hour) r.run.cost = r.run.gpu_hours * *spec.price_per_gpu_hour;
    }
    rows.push_back(r);
  }
  return rows;
}

void print_spare_table(std::ostream& out, const SparePool& pool, const TrainingRunSpec& spec, const std::string& fixed,
                       const std::vector<SpareTemplate>& templates, const std::vector<SpareRow>& rows) {
  out << fmt::format("\nspare nodes for {} tokens on {} nodes: a failed node is back after {} (--repair), so {:.2f} of the "
                     "run's nodes are down on average; with none to stand in the run trains on the plan for the nodes "
                     "it has, keeping plan 1's {}:\n\n",
                     tokens_text(spec.tokens), pool.run_nodes, duration_text(pool.repair_s), mean_nodes_down(pool), fixed);
  const std::string plan_row = "{:>11}  {:>6}  {:<62}  {:>9}\n";
  out << fmt::format(fmt::runtime(plan_row), "nodes short", "GPUs", "plan", "tokens/s");
  for (size_t k = 0; k < templates.size(); ++k)
    out << fmt::format(fmt::runtime(plan_row), k, with_commas(templates[k].gpus),
                       template_text(templates[k]),
                       format_short(template_throughput(templates[k])));
  out << "\n";
  const std::string row = "{:>6}  {:>6}  {:>15}  {:>17}  {:>12}  {:>8}  {:>10}  {:>10}\n";
  out << fmt::format(fmt::runtime(row), "spares", "GPUs", "short of spares", "expected tokens/s", "wall time", "goodput",
                     "GPU-hours", "cost");
  for (const SpareRow& r : rows) {
    const bool ran = r.outcome.expected_tokens_per_s > 0;
    out << fmt::format(fmt::runtime(row), r.spares, with_commas(r.gpus), format_percent(r.outcome.short_probability),
                       format_short(r.outcome.expected_tokens_per_s), ran ? duration_text(r.run.wall_s) : "-",
                       ran ? format_percent(r.run.goodput) : "-", ran ? count_text(r.run.gpu_hours) : "-",
                       ran && r.run.cost ? count_text(*r.run.cost) : "-");
  }
  out << "\nspares: nodes held beside the run, standing in for its failed nodes; GPUs: the run's and the spares'.\n"
         "short of spares: how often more of the run's nodes are down than there are spares, and it trains on the\n"
         "plan for the nodes it has (nodes down at a moment are Poisson, failures independent); expected tokens/s:\n"
         "over those moments; wall time and goodput: that throughput with checkpoints and restarts as above (with\n"
         "spares enough, the time to train above); GPU-hours and cost: spares included.\n";
}

nlohmann::ordered_json spare_json(const SparePool& pool, const std::vector<SpareTemplate>& templates,
                                  const std::vector<SpareRow>& rows) {
  nlohmann::ordered_json short_plans = nlohmann::ordered_json::array();
  for (size_t k = 0; k < templates.size(); ++k) {
    nlohmann::ordered_json j = {{"nodes_short", k}, {"gpus", templates[k].gpus}, {"tokens_per_s", template_throughput(templates[k])}};
    if (templates[k].plan) {
      j["plan"] = describe(templates[k].plan->config);
      j["global_batch_size"] = templates[k].plan->evaluation.scenario.global_batch_size;
      j["way"] = templates[k].way ? to_string(*templates[k].way) : "plan 1";
    }
    short_plans.push_back(j);
  }
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const SpareRow& r : rows) {
    nlohmann::ordered_json j = {{"spares", r.spares},
                                {"gpus", r.gpus},
                                {"short_probability", r.outcome.short_probability},
                                {"expected_tokens_per_s", r.outcome.expected_tokens_per_s}};
    if (r.outcome.expected_tokens_per_s > 0) {
      j["wall_s"] = r.run.wall_s;
      j["goodput"] = r.run.goodput;
      j["gpu_hours"] = r.run.gpu_hours;
      if (r.run.cost) j["cost"] = *r.run.cost;
    }
    list.push_back(j);
  }
  return {{"run_nodes", pool.run_nodes}, {"repair_s", pool.repair_s}, {"mean_nodes_down", mean_nodes_down(pool)},
          {"short_plans", short_plans}, {"rows", list}};
}

}  // namespace pw
