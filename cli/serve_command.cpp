// `pipewright serve simulate`: a model served with tp x pp on a cluster under a workload (serving/serving_sim.hpp):
// throughput, time to first token and per output token, the KV cache.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "cli/output_path.hpp"
#include "cli/serve_options.hpp"
#include "cli/serve_plan.hpp"
#include "cli/serve_run.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/checked_math.hpp"
#include "core/error.hpp"
#include "core/output_file.hpp"
#include "core/units.hpp"
#include "core/work_estimate.hpp"
#include "serving/disaggregated_serving.hpp"
#include "serving/dp_attention_serving.hpp"
#include "serving/serving_metrics.hpp"
#include "serving/serving_replicas.hpp"
#include "serving/serving_trace.hpp"

namespace pw {
namespace {

// The throughput and latency lines both simulations print; `tpot_note` follows the TPOT line.
void print_metrics(std::ostream& out, const ServingMetrics& m, const std::string& tpot_note) {
  out << fmt::format("  output tokens/s     {}\n", format_short(m.output_tokens_per_s));
  out << fmt::format("  total tokens/s      {} (input {})\n", format_short(m.total_tokens_per_s),
                     format_short(m.input_tokens_per_s));
  out << fmt::format("  requests/s          {:.2f}\n", m.requests_per_s);
  std::string columns = "mean";
  for (double p : m.percentiles) columns += " / p" + percentile_text(p);
  out << fmt::format("  {:<19} {}\n", "latency", columns);
  const auto line = [&](const char* name, const LatencyStats& s, const std::string& note) {
    std::string values = s.defined ? format_seconds(s.mean_s) : "-";
    for (double v : s.at_s) values += " / " + (s.defined ? format_seconds(v) : std::string("-"));
    out << fmt::format("  {:<19} {}{}\n", name, values, note);
  };
  line("TTFT", m.ttft, "");
  line("TPOT", m.tpot, m.tpot.defined ? tpot_note : "   (no request has two output tokens)");
  line("ITL", m.itl, "");
  line("end to end", m.e2el, "");
}

// An engine's tp must divide the heads and its pp stay within the blocks; `prefix` names the pool ("--" or
// "--prefill-").
void check_engine(const Model& model, const std::string& prefix, int tp, int pp) {
  const TransformerConfig& t = *model.transformer;
  if (tp < 1 || t.heads % tp != 0)
    throw_bad_input("{}tp: {} does not divide the {} attention heads of '{}'", prefix, tp, t.heads, model.name);
  if (pp < 1 || pp > t.layers)
    throw_bad_input("{}pp: must be from 1 to the {} blocks of '{}', got {}", prefix, t.layers, model.name, pp);
}

// What only data-parallel attention engines run (serving/dp_attention_serving.hpp), refused for single engines.
void refuse_dp_attention_settings(const ServeOptions& o) {
  if (o.two_batch_overlap)
    throw_bad_input("--two-batch-overlap: only data-parallel attention engines overlap their expert all-to-alls with "
                    "compute; add --dp-attention N or leave it out");
  if (o.redundant_experts != 0)
    throw_bad_input("--redundant-experts: replicas of whole experts are spread over data-parallel attention engines; "
                    "add --dp-attention N or leave it out");
}

void run_serve_simulate(const ServeOptions& o, std::ostream& out, int tp, int pp, int replicas, int dp_attention,
                        const std::string& chrome_trace) {
  o.check();
  std::vector<OptionPath> inputs{{"--model", o.model}, {"--cluster", o.cluster}, {"--trace", o.trace}, {"--lengths", o.lengths}};
  check_outputs({{"--chrome-trace", chrome_trace}}, inputs);
  const Model model = o.load_model_checked();
  const Cluster cluster = o.load_cluster_checked();
  check_engine(model, "--", tp, pp);
  if (replicas < 1) throw_bad_input("--replicas: must be at least 1, got {}", replicas);
  if (replicas > 1 && !chrome_trace.empty())
    throw_bad_input("--chrome-trace: draws one engine's stages; leave out --replicas for it");
  if (dp_attention < 1) throw_bad_input("--dp-attention: must be at least 1, got {}", dp_attention);
  if (dp_attention > 1 && !chrome_trace.empty())
    throw_bad_input("--chrome-trace: draws one engine's stages; leave out --dp-attention for it");
  if (dp_attention == 1) refuse_dp_attention_settings(o);
  const int gpus = static_cast<int>(bounded_product({tp, pp, replicas, dp_attention}, std::numeric_limits<int>::max(),
                                                    "GPUs, --tp x --pp x --replicas x --dp-attention", "use fewer replicas"));
  cluster.check_capacity(gpus);
  const std::vector<ServingRequest> requests = o.make_workload();
  ServingConfig c = o.engine(tp, pp, model, cluster);
  c.record_spans = !chrome_trace.empty();
  const CostModelChain chain = o.cost_models();
  const CostModel& cost = chain.model();
  // Replicas as serve plan runs them: each its every replicas-th request.
  const ServingResult r = dp_attention > 1 ? simulate_dp_attention_groups(model, cluster, cost, c, dp_attention, replicas, requests)
                          : replicas > 1   ? simulate_replicas(model, cluster, cost, c, replicas, requests)
                                           : simulate_serving(model, cluster, cost, c, requests);
  const ServingMetrics m = serving_metrics(r, o.more_percentiles());

  std::vector<double> busy;
  for (double b : r.stage_busy_s) busy.push_back(r.makespan_s > 0 ? b / r.makespan_s : 0);
  if (!chrome_trace.empty())
    write_output_file(chrome_trace, serving_trace(r, pp, {{"model", model.name}, {"cluster", cluster.name}, {"tp", tp}, {"pp", pp}})
                                        .dump() + "\n");
  if (o.json) {
    nlohmann::ordered_json j = {{"model", model.name}, {"cluster", cluster.name}, {"engine", c.engine_name},
                                {"engine_version", c.engine_version}, {"tp", tp}, {"pp", pp},
                                {"replicas", replicas}, {"requests", requests.size()}};
    if (dp_attention > 1)
      j.update(nlohmann::ordered_json{{"dp_attention", dp_attention}, {"ep", dp_attention * tp},
                                      {"two_batch_overlap", c.two_batch_overlap}, {"redundant_experts", c.redundant_experts}});
    add_metrics_json(j, m);
    j.update(nlohmann::ordered_json{{"makespan_s", r.makespan_s},
                                      {"kv_capacity_tokens", r.kv_capacity_tokens},
                                      {"peak_kv_use", r.peak_kv_use},
                                      {"preemptions", r.preemptions},
                                      {"batches", r.batches},
                                    {"max_running", r.max_running},
                                    {"stage_busy_fraction", busy}});
    if (chain.tables()) j["kernel_tables"] = chain.tables_json();
    out << j.dump(2) << "\n";
    return;
  }
  std::string copies = dp_attention > 1 ? fmt::format(" x {} data-parallel attention engines, ep {}", dp_attention,
                                                      dp_attention * tp)
                                        : std::string();
  if (c.redundant_experts > 0)
    copies += fmt::format(" ({} expert slots, {} redundant)", model.transformer->moe->experts + c.redundant_experts,
                          c.redundant_experts);
  if (c.two_batch_overlap) copies += ", two-batch overlap";
  if (replicas > 1) copies += fmt::format(" x {} replicas", replicas);
  out << fmt::format("{} on {} with {} {}{}: tp {}, pp {}{} ({} GPUs), {}\n", model.name, cluster.name, c.engine_name,
                     c.engine_version, c.eager ? " (eager)" : "", tp, pp, copies, gpus, o.workload_text(requests.size()));
  out << fmt::format("KV cache {} tokens ({}), peak use {}; at most {} requests running; {} preemptions; {} batches\n\n",
                     with_commas(r.kv_capacity_tokens), o.kv_cache_dtype == "fp8" ? "fp8" : "bf16",
                     format_percent(r.peak_kv_use), r.max_running, r.preemptions, with_commas(r.batches));
  std::string stages;
  for (size_t s = 0; s < busy.size(); ++s) stages += (s ? ", " : "") + format_percent(busy[s]);
  print_metrics(out, m, "");
  out << fmt::format("  stages busy         {} of the {} run\n", stages, format_seconds(r.makespan_s));
  o.print_cost_model(out, chain);
}

// The prefill pool's shape, given by --prefill-tp (its presence turns disaggregation on).
struct PrefillPoolOptions {
  std::optional<int> tp;
  int pp = 1, replicas = 1, dp_attention = 1;
};

// "tp 2 pp 1 x 3", or "tp 1 x 32 data-parallel attention engines (ep 32) x 1".
std::string pool_text(const ServingPool& p) {
  if (p.dp_attention > 1)
    return fmt::format("tp {} x {} data-parallel attention engines (ep {}) x {}", p.engine.tp, p.dp_attention,
                       p.engine.tp * p.dp_attention, p.replicas);
  return fmt::format("tp {} pp {} x {}", p.engine.tp, p.engine.pp, p.replicas);
}

nlohmann::ordered_json pool_json(const ServingPool& p) {
  return {{"tp", p.engine.tp}, {"pp", p.engine.pp}, {"replicas", p.replicas}, {"dp_attention", p.dp_attention},
          {"ep", p.dp_attention > 1 ? p.dp_attention * p.engine.tp : 1}};
}

// --tp, --pp, --dp-attention and --replicas give the decode pool.
void run_serve_disaggregated(const ServeOptions& o, std::ostream& out, int tp, int pp, int replicas, int dp_attention,
                             const PrefillPoolOptions& pool, const std::string& chrome_trace) {
  o.check();
  if (!chrome_trace.empty()) throw_bad_input("--chrome-trace: draws one engine's stages; leave out --prefill-tp for it");
  const Model model = o.load_model_checked();
  const Cluster cluster = o.load_cluster_checked();
  check_engine(model, "--", tp, pp);
  check_engine(model, "--prefill-", *pool.tp, pool.pp);
  if (dp_attention < 1) throw_bad_input("--dp-attention: must be at least 1, got {}", dp_attention);
  if (pool.dp_attention < 1) throw_bad_input("--prefill-dp-attention: must be at least 1, got {}", pool.dp_attention);
  if (dp_attention == 1 && pool.dp_attention == 1) refuse_dp_attention_settings(o);
  const std::vector<ServingRequest> requests = o.make_workload();
  ServingPool prefill, decode;
  prefill.engine = o.engine(*pool.tp, pool.pp, model, cluster);
  prefill.replicas = pool.replicas;
  prefill.dp_attention = pool.dp_attention;
  decode.engine = o.engine(tp, pp, model, cluster);
  decode.replicas = replicas;
  decode.dp_attention = dp_attention;
  const CostModelChain chain = o.cost_models();
  const CostModel& cost = chain.model();
  const DisaggregatedResult r = simulate_disaggregated(model, cluster, cost, prefill, decode, requests);
  const ServingMetrics m = serving_metrics(r.served, o.more_percentiles());
  if (o.json) {
    nlohmann::ordered_json j = {{"model", model.name}, {"cluster", cluster.name}, {"requests", requests.size()},
                                {"prefill_pool", pool_json(prefill)}, {"decode_pool", pool_json(decode)}};
    add_metrics_json(j, m);
    j.update(nlohmann::ordered_json{{"makespan_s", r.served.makespan_s},
                                    {"kv_transfer_s_mean", r.kv_transfer_s},
                                    {"preemptions", r.served.preemptions},
                                    {"prefill_kv_capacity_tokens", r.prefill.kv_capacity_tokens},
                                    {"decode_kv_capacity_tokens", r.decode.kv_capacity_tokens},
                                    {"decode_max_running", r.decode.max_running}});
    if (chain.tables()) j["kernel_tables"] = chain.tables_json();
    out << j.dump(2) << "\n";
    return;
  }
  out << fmt::format("{} on {}: disaggregated, prefill pool {}, decode pool {} ({} GPUs), {}\n", model.name,
                     cluster.name, pool_text(prefill), pool_text(decode), prefill.gpus() + decode.gpus(),
                     o.workload_text(requests.size()));
  out << fmt::format("KV cache over {} per request on average ({} at {}); decode pool: at most {} requests running, "
                     "{} preemptions\n\n",
                     format_seconds(r.kv_transfer_s), r.kv_link.inter_node ? "between nodes" : "inside a node",
                     format_rate(r.kv_link.bandwidth_bytes_per_s), r.decode.max_running, r.served.preemptions);
  print_metrics(out, m, "   (from the first token: the cache's transfer included)");
  o.print_cost_model(out, chain);
}

}  // namespace

CommandRunner add_serve_command(CLI::App& app) {
  auto* serve = app.add_subcommand("serve", "Serving with tp x pp: simulate a workload, or plan the configuration");
  serve->require_subcommand(1);
  auto* sim = serve->add_subcommand("simulate", "Simulate serving a workload: throughput, TTFT, TPOT, KV cache");
  auto so = std::make_shared<ServeOptions>();
  auto degrees = std::make_shared<std::pair<int, int>>(1, 1);
  auto replicas = std::make_shared<int>(1);
  auto dp_attention = std::make_shared<int>(1);
  auto chrome_trace = std::make_shared<std::string>();
  so->add_to(*sim);
  so->add_kernels_to(*sim);
  so->add_speculative_to(*sim);
  so->add_expert_parallel_to(*sim);
  so->add_percentiles_to(*sim);
  sim->add_option("--chrome-trace", *chrome_trace, "Write each stage's batches as a Chrome / Perfetto trace");
  sim->add_option("--tp", degrees->first, "Tensor-parallel degree")->capture_default_str();
  sim->add_option("--pp", degrees->second, "Pipeline-parallel degree")->capture_default_str();
  sim->add_option("--replicas", *replicas, "Copies of the engine, each taking every replicas-th request")
      ->capture_default_str();
  sim->add_option("--dp-attention", *dp_attention,
                  "Data-parallel attention engines of tp x 1 GPUs, each with its own requests (in turn) and KV cache, "
                  "a mixture of experts' experts spread over all of them (ep = dp-attention x tp); --replicas copies "
                  "the group")
      ->capture_default_str();
  auto pool = std::make_shared<PrefillPoolOptions>();
  sim->add_option("--prefill-tp", pool->tp,
                  "Disaggregated: a prefill pool of this tp (--tp, --pp, --dp-attention, --replicas: the decode pool's)");
  sim->add_option("--prefill-pp", pool->pp, "Disaggregated: the prefill pool's pp")->capture_default_str();
  sim->add_option("--prefill-replicas", pool->replicas, "Disaggregated: prefill engines")->capture_default_str();
  sim->add_option("--prefill-dp-attention", pool->dp_attention,
                  "Disaggregated: the prefill pool's engines as groups of this many data-parallel attention engines "
                  "of --prefill-tp GPUs (--dp-attention: the decode pool's)")
      ->capture_default_str();
  auto* plan = serve->add_subcommand("plan", "Search tp, pp and replicas for a workload on some GPUs");
  auto po = std::make_shared<ServePlanOptions>();
  po->serve.add_to(*plan);
  po->serve.add_kernels_to(*plan);
  po->serve.add_speculative_to(*plan);
  po->serve.add_expert_parallel_to(*plan);
  po->add_to(*plan);
  auto* run = serve->add_subcommand("run", "Serve a workload for real on the CPU backend, measured against the simulation");
  auto ro = std::make_shared<ServeRunOptions>();
  ro->add_to(*run);
  return [so, degrees, replicas, dp_attention, chrome_trace, pool, sim, po, plan, ro, run](std::ostream& out) {
    if (sim->parsed() && !pool->tp && pool->dp_attention != 1)
      throw_bad_input("--prefill-dp-attention: gives the prefill pool of a disaggregated run; add --prefill-tp");
    if (sim->parsed() && pool->tp)
      run_serve_disaggregated(*so, out, degrees->first, degrees->second, *replicas, *dp_attention, *pool, *chrome_trace);
    if (sim->parsed() && !pool->tp)
      run_serve_simulate(*so, out, degrees->first, degrees->second, *replicas, *dp_attention, *chrome_trace);
    if (plan->parsed()) run_serve_plan(*po, out);
    if (run->parsed()) run_serve_run(*ro, out);
  };
}

}  // namespace pw
