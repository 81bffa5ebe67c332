#include "cli/serve_plan.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "cli/duration_option.hpp"
#include "cli/work_bounds.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/checked_math.hpp"
#include "core/error.hpp"
#include "core/time_to_train.hpp"
#include "core/units.hpp"
#include "core/work_estimate.hpp"
#include "exports/disaggregated.hpp"
#include "exports/sglang.hpp"
#include "exports/vllm.hpp"
#include "planner/serving_capacity.hpp"
#include "planner/serving_plan.hpp"
#include "planner/serving_plan_estimate.hpp"

namespace pw {

void ServePlanOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--gpus", gpus, "GPUs to serve with: tp x pp x replicas")->required();
  cmd.add_option("--top", top, "Plans to print")->capture_default_str();
  as_duration(cmd.add_option("--ttft-slo", ttft_slo_s,
                             "Time to the first token a request may take (at --slo-percentile), e.g. 2s or 500ms"),
              1.0);
  as_duration(cmd.add_option("--tpot-slo", tpot_slo_s,
                             "Time per output token after the first (at --slo-percentile), e.g. 50ms"),
              1.0);
  cmd.add_option("--slo-percentile", slo_percentile, "The percentile the SLOs hold at")->capture_default_str();
  cmd.add_option("--gpu-hour-price", gpu_hour_price, "Price of one GPU-hour: each plan's cost per million output tokens");
  cmd.add_option("--export", export_target, "Print plan 1 as the command that serves it: vllm or sglang");
  cmd.add_flag("--disaggregate", disaggregate, "Also plan separate prefill and decode pools");
  add_allow_large_flag(cmd, allow_large);
  cmd.add_option("--target-rate", target_rate,
                 "Also find the fewest GPUs (up to --gpus) whose best plan meets the SLOs at this many requests/s (Poisson)");
  cmd.add_option("--threads", threads, "Threads simulating the configurations (default: all cores)");
  cmd.add_flag("--max-rate", max_rate,
               "Also find the highest Poisson request rate at which plan 1 meets the SLOs (--ttft-slo, --tpot-slo)");
}

namespace {

// A latency limit: a microsecond (one kernel launch) to 11.6 days.
constexpr FigureRange kSloRange{1e-6, 1e6, "s"};

// The GPUs' price per million output tokens at the plan's throughput (every plan uses all of them).
double cost_per_million_tokens(double price_per_gpu_hour, int gpus, double tokens_per_s) {
  return tokens_per_s > 0 ? price_per_gpu_hour * gpus / 3600 / tokens_per_s * 1e6 : 0;
}

// Plan 1 as the commands that serve it on `target`: one engine (or its replicas), or a disaggregated plan's
// servers and router.
std::string export_command(const std::string& target, const ServingPlan& plan, const ServingEngineFor& engine_for,
                           const Model& model, int gpus_per_node) {
  const std::string weights = "\"$MODEL\"";
  std::string out = fmt::format("# MODEL: the Hugging Face id or local folder of {}\n", model.name);
  const ServingConfig engine = engine_for(plan.tp, plan.pp);
  if (engine.speculative_method == "eagle") out += "# DRAFT_MODEL: the Hugging Face id or local folder of its EAGLE head\n";
  if (plan.disaggregated()) {
    const ServingConfig prefill = engine_for(plan.prefill_tp, plan.prefill_pp);
    return out + (target == "vllm" ? vllm_disaggregated_commands(plan, prefill, engine, weights, gpus_per_node)
                                   : sglang_disaggregated_commands(plan, prefill, engine, weights, gpus_per_node));
  }
  const bool routed_experts = model.transformer && model.transformer->moe;
  return out + (target == "vllm" ? vllm_serve_command(plan, engine, weights, gpus_per_node, routed_experts)
                                 : sglang_launch_commands(plan, engine, weights, gpus_per_node));
}

// A plan's data-parallel attention engines, in words: "4 engines of tp 2 (ep 8)", and a prefill pool's.
std::string dp_attention_text(const ServingPlan& p) {
  std::string text = p.dp_attention > 1 ? fmt::format("{} engines of tp {} (ep {})", p.dp_attention, p.tp, p.ep())
                                        : fmt::format("engines of tp {} x pp {}", p.tp, p.pp);
  if (p.prefill_dp_attention > 1)
    text += fmt::format(" after a prefill pool of {} engines of tp {} (ep {})", p.prefill_dp_attention, p.prefill_tp,
                        p.prefill_ep());
  return text;
}

}  // namespace

void run_serve_plan(const ServePlanOptions& o, std::ostream& out) {
  o.serve.check();
  if (!o.export_target.empty() && o.export_target != "vllm" && o.export_target != "sglang")
    throw_bad_input("--export: '{}' is not a serving target; use vllm or sglang", o.export_target);
  // A launch command runs its engine's scheduler: the plans must have been simulated with it.
  if (!o.export_target.empty() && o.export_target != o.serve.engine_kind)
    throw_bad_input("--export {}: the plans were simulated with {}'s scheduler (--engine {}); add --engine {} to plan for "
                    "the engine the command launches",
                    o.export_target, o.serve.engine_kind, o.serve.engine_kind, o.export_target);
  check_top(o.top);
  if (o.ttft_slo_s) check_in_range("--ttft-slo", *o.ttft_slo_s, kSloRange);
  if (o.tpot_slo_s) check_in_range("--tpot-slo", *o.tpot_slo_s, kSloRange);
  if (o.gpu_hour_price) check_in_range("--gpu-hour-price", *o.gpu_hour_price, kGpuHourPriceRange);
  if (o.threads < 0) throw_bad_input("--threads: must be 0 (all cores) or more, got {}", o.threads);
  if (!(o.slo_percentile > 0 && o.slo_percentile <= 100))
    throw_bad_input("--slo-percentile: must be in (0, 100], got {}", o.slo_percentile);
  for (const auto& [flag, given] : {std::pair<const char*, bool>{"--max-rate", o.max_rate}, {"--target-rate", o.target_rate.has_value()}}) {
    if (!given) continue;
    if (!o.ttft_slo_s && !o.tpot_slo_s) throw_bad_input("{}: give --ttft-slo or --tpot-slo, the limits the rate must keep", flag);
    if (!o.serve.trace.empty() || o.serve.concurrency)
      throw_bad_input("{}: searches Poisson arrival rates; leave out --trace and --concurrency", flag);
  }
  if (o.target_rate && !(*o.target_rate > 0 && std::isfinite(*o.target_rate)))
    throw_bad_input("--target-rate: must be a positive number of requests per second, got {}", *o.target_rate);
  const Model model = o.serve.load_model_checked();
  const Cluster cluster = o.serve.load_cluster_checked();
  const std::vector<ServingRequest> requests = o.serve.make_workload();
  ServingSlo slo;
  slo.ttft_s = o.ttft_slo_s;
  slo.tpot_s = o.tpot_slo_s;
  slo.percentile = o.slo_percentile;
  const CostModelChain chain = o.serve.cost_models();
  const CostModel& cost = chain.model();
  const ServingEngineFor engine_for = [&](int tp, int pp) { return o.serve.engine(tp, pp, model, cluster); };
  // vLLM balances data-parallel attention engines by their queues, not in turn as simulated: its plans leave
  // them out, and the best of all says what that cost when it is one of them (only a mixture of experts has
  // them; there every plan is needed to see past them).
  const bool vllm_export = o.export_target == "vllm" && model.transformer && model.transformer->moe;
  const int top = vllm_export ? 0 : o.top;
  std::vector<WorkEstimate> work{serving_plan_estimate(model, cluster, o.gpus, o.disaggregate, top, engine_for, requests)};
  // --target-rate searches again at every count of GPUs up to --gpus, each for its plan 1, with no limit of its
  // own while it runs: every configuration is counted.
  if (o.target_rate) {
    WorkEstimate searches;
    const std::vector<ServingRequest> at_target = o.serve.make_workload_at(*o.target_rate);
    for (int g = 1; g <= o.gpus; ++g)
      searches.seconds += serving_plan_estimate(model, cluster, g, o.disaggregate, 0, engine_for, at_target).seconds;
    searches.work = fmt::format("--target-rate's searches at 1 to {} GPUs", o.gpus);
    searches.fix = "give a smaller --gpus to search up to";
    work.push_back(searches);
  }
  check_work_unless_allowed("serve plan", work, o.allow_large);
  ServingPlanResult r = plan_serving(model, cluster, cost, o.gpus, engine_for, requests, slo, top, o.disaggregate,
                                     o.threads, o.allow_large ? 0 : kWorkSecondsLimit);
  std::optional<ServingPlan> ruled_out;
  if (vllm_export) {
    const auto dpa = [](const ServingPlan& p) { return p.dp_attention > 1 || p.prefill_dp_attention > 1; };
    if (dpa(r.plans.front())) ruled_out = r.plans.front();
    std::erase_if(r.plans, dpa);
    if (r.plans.empty())
      throw_bad_input("--export vllm: only data-parallel attention plans serve this workload, and vLLM balances those "
                      "engines by their queues, not in turn as simulated; export sglang");
    if (static_cast<int>(r.plans.size()) > o.top) r.plans.resize(static_cast<size_t>(o.top));
  }
  // The weights are not pipewright's to name: the command reads them from $MODEL.
  const int gpus_per_node = cluster.ideal ? o.gpus : cluster.gpus_per_node;
  const std::string command = o.export_target.empty() ? std::string() : export_command(o.export_target, r.plans.front(),
                                                                                       engine_for, model, gpus_per_node);

  // Plan 1 under ever faster Poisson arrivals of the same requests: where its SLO percentiles stop holding.
  std::optional<double> max_rate;
  if (o.max_rate)
    max_rate = max_serving_rate(model, cluster, cost, engine_for, r.plans.front(),
                                [&](double rate) { return o.serve.make_workload_at(rate); }, slo);

  // The fewest GPUs, counting up to --gpus, whose plan 1 meets the SLOs with the requests arriving at the target rate.
  std::optional<std::pair<int, ServingPlan>> fewest;
  if (o.target_rate) {
    const std::vector<ServingRequest> at_target = o.serve.make_workload_at(*o.target_rate);
    for (int g = 1; g <= o.gpus && !fewest; ++g) {
      try {
        const ServingPlanResult best = plan_serving(model, cluster, cost, g, engine_for, at_target, slo, 1, o.disaggregate, o.threads);
        if (best.plans.front().meets_slo) fewest.emplace(g, best.plans.front());
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::BadInput) throw;  // no configuration of g GPUs serves the model: try more
      }
    }
  }

  if (o.serve.json) {
    nlohmann::ordered_json plans = nlohmann::ordered_json::array();
    for (const ServingPlan& p : r.plans) {
      nlohmann::ordered_json j = {{"tp", p.tp}, {"pp", p.pp}, {"replicas", p.replicas},
                                  {"dp_attention", p.dp_attention}, {"ep", p.ep()}};
      if (o.disaggregate)
        j["prefill_pool"] = p.disaggregated() ? nlohmann::ordered_json{{"tp", p.prefill_tp}, {"pp", p.prefill_pp},
                                                                       {"replicas", p.prefill_replicas},
                                                                       {"dp_attention", p.prefill_dp_attention},
                                                                       {"ep", p.prefill_ep()}}
                                              : nlohmann::ordered_json();
      add_metrics_json(j, p.metrics);
      j.update(nlohmann::ordered_json{{"kv_capacity_tokens", p.kv_capacity_tokens},
                                      {"preemptions", p.preemptions},
                                      {"slo_share", p.slo_share},
                                      {"goodput_requests_per_s", p.goodput_rps},
                                      {"meets_slo", p.meets_slo}});
      plans.push_back(std::move(j));
    }
    if (o.gpu_hour_price)
      for (size_t i = 0; i < r.plans.size(); ++i)
        plans[i]["cost_per_million_tokens"] =
            cost_per_million_tokens(*o.gpu_hour_price, o.gpus, r.plans[i].metrics.output_tokens_per_s);
    nlohmann::ordered_json j = {{"model", model.name}, {"cluster", cluster.name}, {"gpus", o.gpus},
                                {"configurations", r.considered}, {"plans", plans}};
    if (!command.empty()) j[o.export_target + "_command"] = command;
    if (ruled_out)
      j["export_limit"] = {{"left_out", "data-parallel attention"},
                           {"dp_attention", ruled_out->dp_attention},
                           {"prefill_dp_attention", ruled_out->prefill_dp_attention},
                           {"tp", ruled_out->tp},
                           {"output_tokens_per_s", ruled_out->metrics.output_tokens_per_s}};
    // null: no count of GPUs up to --gpus meets the SLOs at the rate.
    if (o.target_rate)
      j["fewest_gpus"] = fewest ? nlohmann::ordered_json{{"gpus", fewest->first}, {"tp", fewest->second.tp},
                                                          {"pp", fewest->second.pp}, {"replicas", fewest->second.replicas},
                                                          {"dp_attention", fewest->second.dp_attention},
                                                          {"disaggregated", fewest->second.disaggregated()}}
                                : nlohmann::ordered_json();
    // null: the SLOs hold at any rate (every request at once).
    if (max_rate) j["max_rate_requests_per_s"] = std::isinf(*max_rate) ? nlohmann::ordered_json() : nlohmann::ordered_json(*max_rate);
    if (chain.tables()) j["kernel_tables"] = chain.tables_json();
    out << j.dump(2) << "\n";
    return;
  }
  out << fmt::format("{} on {}: {} GPUs, {}\n", model.name, cluster.name, o.gpus, o.serve.workload_text(requests.size()));
  const bool by_slo = slo.any();
  std::string slos;
  if (o.ttft_slo_s) slos += fmt::format("TTFT <= {}", format_seconds(*o.ttft_slo_s));
  if (o.tpot_slo_s) slos += fmt::format("{}TPOT <= {}", slos.empty() ? "" : ", ", format_seconds(*o.tpot_slo_s));
  out << fmt::format("searched {} configurations; the {} best {}:\n\n", r.considered, r.plans.size(),
                     by_slo ? fmt::format("by goodput under p{:g} {}", o.slo_percentile, slos) : std::string("by output tokens/s"));
  const bool priced = o.gpu_hour_price.has_value();
  const std::string row = "{:>3}  {:>2}  {:>2}  {:>8}{}{}  {:>12}  {:>7}  {:>10}  {:>10}  {:>10}  {:>10}  {:>11}  {:>8}{}{}\n";
  // With --disaggregate: the prefill pool beside the (decode) engine, "-" for a single pool.
  auto pool = [&](const std::string& text) { return o.disaggregate ? fmt::format("  {:>19}", text) : std::string(); };
  // Where a plan runs data-parallel attention engines: how many, and the ep their experts spread over.
  const bool any_dpa = std::any_of(r.plans.begin(), r.plans.end(), [](const ServingPlan& p) { return p.dp_attention > 1; });
  auto dpa = [&](const std::string& text) { return any_dpa ? fmt::format("  {:>13}", text) : std::string(); };
  out << fmt::format(fmt::runtime(row), "#", "tp", "pp", "replicas", dpa("dp attention"), pool("prefill pool"),
                     "output tok/s", "req/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "KV tokens", "SLO met",
                     priced ? "  per M tokens" : "", "");
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const ServingPlan& p = r.plans[i];
    const std::string prefill =
        !p.disaggregated()            ? std::string("-")
        : p.prefill_dp_attention > 1 ? fmt::format("tp {} {} x ep {} x {}", p.prefill_tp, p.prefill_dp_attention,
                                                   p.prefill_ep(), p.prefill_replicas)
                                      : fmt::format("tp {} pp {} x {}", p.prefill_tp, p.prefill_pp, p.prefill_replicas);
    out << fmt::format(fmt::runtime(row), i + 1, p.tp, p.pp, p.replicas,
                       dpa(p.dp_attention > 1 ? fmt::format("{} x ep {}", p.dp_attention, p.ep()) : "-"), pool(prefill),
                       format_short(p.metrics.output_tokens_per_s),
                       fmt::format("{:.2f}", p.metrics.requests_per_s), format_seconds(p.metrics.ttft_p50_s),
                       format_seconds(p.metrics.ttft_p99_s), format_seconds(p.metrics.tpot_p50_s),
                       format_seconds(p.metrics.tpot_p99_s), with_commas(p.kv_capacity_tokens),
                       by_slo ? format_percent(p.slo_share) : "-",
                       priced ? fmt::format("  {:>13.3f}", cost_per_million_tokens(*o.gpu_hour_price, o.gpus,
                                                                                 p.metrics.output_tokens_per_s))
                              : "",
                       by_slo && !p.meets_slo ? "  best effort" : "");
  }
  out << "\nreplicas: copies of the tp x pp engine, each serving every replicas-th request; KV tokens: one engine's\n"
         "cache; SLO met: requests within both limits; best effort: the SLO percentile misses a limit.\n";
  if (any_dpa)
    out << "dp attention: a group of that many engines of tp GPUs, each with its own requests (in turn) and KV cache\n"
           "(KV tokens: one engine's), stepping together, the routed experts spread whole over the group's GPUs (ep);\n"
           "replicas copy the group.\n";
  if (o.disaggregate)
    out << "prefill pool: its engines compute each prompt and first token, the KV cache goes over the link to the\n"
           "tp x pp x replicas decode engines (their KV tokens shown); -: one pool serves both.\n";
  if (std::any_of(r.plans.begin(), r.plans.end(), [](const ServingPlan& p) { return p.prefill_dp_attention > 1; }))
    out << "tp T D x ep E x R (prefill pool): R groups of D data-parallel attention engines of tp T.\n";
  if (priced) out << "per M tokens: --gpu-hour-price x GPUs for the time a million output tokens take.\n";
  if (o.target_rate)
    out << (fewest ? fmt::format("\nfewest GPUs: {} (tp {}, pp {} x {} replicas{}) meet p{:g} {} at {:g} requests/s ({} "
                                 "requests, Poisson arrivals)\n",
                                 fewest->first, fewest->second.tp, fewest->second.pp, fewest->second.replicas,
                                 fewest->second.disaggregated()      ? ", with a prefill pool"
                                 : fewest->second.dp_attention > 1   ? fmt::format(", {} data-parallel attention engines a group",
                                                                                   fewest->second.dp_attention)
                                                                     : std::string(),
                                 o.slo_percentile, slos,
                                 *o.target_rate, requests.size())
                   : fmt::format("\nfewest GPUs: none of 1 to {} meets p{:g} {} at {:g} requests/s\n", o.gpus,
                                 o.slo_percentile, slos, *o.target_rate));
  if (max_rate)
    out << (std::isinf(*max_rate) ? fmt::format("\nmax rate: plan 1 meets p{:g} {} even with all {} requests at once\n",
                                                o.slo_percentile, slos, requests.size())
            : *max_rate > 0 ? fmt::format("\nmax rate: plan 1 meets p{:g} {} up to {:.3g} requests/s ({} requests, Poisson "
                                        "arrivals, to 0.5%)\n",
                                        o.slo_percentile, slos, *max_rate, requests.size())
                          : fmt::format("\nmax rate: plan 1 misses p{:g} {} even at a thousandth of its saturated rate\n",
                                        o.slo_percentile, slos));
  o.serve.print_cost_model(out, chain);
  if (vllm_export) {
    out << "\n--export vllm: data-parallel attention plans were not searched: vLLM balances its engines by their queues, "
           "not in turn as simulated";
    if (ruled_out)
      out << fmt::format("; the search with them ranks one first, {}, at {} output tokens/s against plan 1's {} "
                         "(export sglang to run it)\n",
                         dp_attention_text(*ruled_out), format_short(ruled_out->metrics.output_tokens_per_s),
                         format_short(r.plans.front().metrics.output_tokens_per_s));
    else
      out << "; the search with them ranks none first\n";
  }
  if (!command.empty())
    out << (o.export_target == "vllm" ? "\n--- vllm serve, plan 1 ---\n" : "\n--- sglang, plan 1 ---\n") << command;
}

}  // namespace pw
