#include "cli/spare_nodes_output.hpp"

#include <fmt/format.h>

#include "cli/train_cost_options.hpp"
#include "core/units.hpp"
#include "planner/failure_report.hpp"

namespace pw {

std::vector<SpareRow> spare_rows(const SparePool& pool, int max_spares, const std::vector<SpareTemplate>& templates,
                                 const TrainingRunSpec& spec) {
  std::vector<double> throughput;
  for (const SpareTemplate& t : templates)
    throughput.push_back(t.plan ? t.plan->evaluation.metrics.throughput_tokens_per_s : 0.0);
  std::vector<SpareRow> rows;
  for (int s = 0; s <= max_spares; ++s) {
    SpareRow r;
    r.spares = s;
    const SpareTemplate& t = templates[static_cast<size_t>(s)];
    r.gpus = t.gpus;
    if (t.plan) r.config = t.plan->config;
    r.tokens_per_s = throughput[static_cast<size_t>(s)];
    r.outcome = with_spares(pool, s, throughput);
    if (r.config && r.outcome.expected_tokens_per_s > 0) {
      TrainingRunSpec run = spec;
      run.gpus = plan_gpus(*r.config);
      r.run = training_run_cost(run, r.outcome.expected_tokens_per_s);
      // Spares are paid for while they wait.
      r.run.gpu_hours = r.run.wall_s / 3600 * pool.nodes * pool.gpus_per_node;
      if (spec.price_per_gpu_hour) r.run.cost = r.run.gpu_hours * *spec.price_per_gpu_hour;
    }
    rows.push_back(r);
  }
  return rows;
}

void print_spare_table(std::ostream& out, const SparePool& pool, const TrainingRunSpec& spec, const std::string& fixed,
                       const std::vector<SpareRow>& rows) {
  out << fmt::format("\nspare nodes for {} tokens on {} nodes: a failed node is back after {} (--repair), so {:.2f} nodes "
                     "are down on average; the templates keep plan 1's {}:\n\n",
                     tokens_text(spec.tokens), pool.nodes, duration_text(pool.repair_s), mean_nodes_down(pool), fixed);
  const std::string row = "{:>6}  {:>5}  {:<40}  {:>9}  {:>15}  {:>17}  {:>12}  {:>8}  {:>10}  {:>10}\n";
  out << fmt::format(fmt::runtime(row), "spares", "GPUs", "plan", "tokens/s", "short of spares", "expected tokens/s",
                     "wall time", "goodput", "GPU-hours", "cost");
  for (const SpareRow& r : rows) {
    const std::string plan =
        r.config ? fmt::format("pp={}, dp={}, vpp={}, mbs {}, {}", r.config->pp, r.config->dp, r.config->vpp,
                               r.config->micro_batch_size, r.config->schedule)
                 : "nothing fits";
    const bool ran = r.config && r.outcome.expected_tokens_per_s > 0;
    out << fmt::format(fmt::runtime(row), r.spares, r.gpus, plan, format_short(r.tokens_per_s),
                       format_percent(r.outcome.short_probability), format_short(r.outcome.expected_tokens_per_s),
                       ran ? duration_text(r.run.wall_s) : "-", ran ? format_percent(r.run.goodput) : "-",
                       ran ? count_text(r.run.gpu_hours) : "-", ran && r.run.cost ? count_text(*r.run.cost) : "-");
  }
  out << "\nshort of spares: how often more nodes are down than are held back, and the run trains on the plan for the\n"
         "nodes it has (nodes down at a moment are Poisson, failures independent); expected tokens/s: over those\n"
         "moments; wall time and goodput: that throughput with checkpoints and restarts as above; GPU-hours and\n"
         "cost: the whole pool, spares included.\n";
}

nlohmann::ordered_json spare_json(const SparePool& pool, const std::vector<SpareRow>& rows) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const SpareRow& r : rows) {
    nlohmann::ordered_json j = {{"spares", r.spares},
                                {"gpus", r.gpus},
                                {"tokens_per_s", r.tokens_per_s},
                                {"short_probability", r.outcome.short_probability},
                                {"expected_tokens_per_s", r.outcome.expected_tokens_per_s}};
    if (r.config) j["plan"] = describe(*r.config);
    if (r.config && r.outcome.expected_tokens_per_s > 0) {
      j["wall_s"] = r.run.wall_s;
      j["goodput"] = r.run.goodput;
      j["gpu_hours"] = r.run.gpu_hours;
      if (r.run.cost) j["cost"] = *r.run.cost;
    }
    list.push_back(j);
  }
  return {{"pool_nodes", pool.nodes}, {"repair_s", pool.repair_s}, {"mean_nodes_down", mean_nodes_down(pool)}, {"rows", list}};
}

}  // namespace pw
