// Disaggregated serving (serving/disaggregated_serving.hpp): a lone request's first token is its prefill on the
// prefill pool, its cache crosses the link, and each next token is one decode on the decode pool; a prefilled
// request decodes at once; a closed loop is refused.
#include <catch2/catch.hpp>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/kv_cache.hpp"
#include "serving/disaggregated_serving.hpp"
#include "serving/dp_attention_serving.hpp"
#include "../error_text.hpp"

using namespace pw;

namespace {

double one_stage(const Model& m, const Cluster& c, const CostModel& cost, const ServingBatch& b) {
  ParallelConfig pc;
  return serving_stage_time(m, {0, m.num_layers() - 1}, 1, b, c.gpu_at(0), group_links(c, pc, 0).tp, cost,
                            KvCacheDtype::Bf16);
}

ServingBatch decode_at(long context) { return serving_batch({{0, context - 1, 1, true}}); }

}  // namespace

TEST_CASE("disaggregated: the first token is the prefill pool's, then the cache's transfer, then one decode a token") {
  const Model m = model_preset("llama3-8b");
  const Cluster c = cluster_preset("dgx-h100");
  const AnalyticCostModel cost;
  ServingPool prefill, decode;
  const std::vector<ServingRequest> one{{0.5, 1000, 3}};
  const DisaggregatedResult r = simulate_disaggregated(m, c, cost, prefill, decode, one);

  const double first = 0.5 + one_stage(m, c, cost, serving_batch({{0, 0, 1000, true}}));
  CHECK(r.served.requests[0].first_token_s == Approx(first).epsilon(1e-12));
  const LinkSpec link = cost.p2p_link(c.link(0, 1));
  const double bytes = kv_bytes_for_tokens(m, {0, m.num_layers() - 1}, 1, 1000, KvCacheDtype::Bf16);
  CHECK(r.kv_transfer_s == Approx(link.latency_s + bytes / link.bandwidth_bytes_per_s).epsilon(1e-12));
  // The decode pool: tokens 2 and 3, each one decode over the cache of 1001 and 1002 positions.
  const double last = first + r.kv_transfer_s + one_stage(m, c, cost, decode_at(1001)) + one_stage(m, c, cost, decode_at(1002));
  CHECK(r.served.requests[0].last_token_s == Approx(last).epsilon(1e-12));
  CHECK(r.served.makespan_s == r.served.requests[0].last_token_s);
  CHECK(r.decode.requests[0].first_token_s == Approx(first + r.kv_transfer_s).epsilon(1e-12));

  // Two GPU pairs per engine (tp 2) send their halves at once.
  prefill.engine.tp = decode.engine.tp = 2;
  const DisaggregatedResult wide = simulate_disaggregated(m, c, cost, prefill, decode, one);
  CHECK(wide.kv_transfer_s == Approx(link.latency_s + bytes / (2 * link.bandwidth_bytes_per_s)).epsilon(1e-12));

  // A request of one output token never reaches the decode pool.
  const DisaggregatedResult short_one = simulate_disaggregated(m, c, cost, ServingPool{}, ServingPool{}, {{0.0, 100, 1}});
  CHECK(short_one.served.requests[0].last_token_s == short_one.served.requests[0].first_token_s);
  CHECK(short_one.decode.requests.empty());
}

TEST_CASE("disaggregated: a closed loop is refused, and a prefilled request needs a token to decode") {
  const Model m = model_preset("llama3-8b");
  const Cluster c = cluster_preset("dgx-h100");
  const AnalyticCostModel cost;
  ServingPool prefill, decode;
  prefill.engine.concurrency = 4;
  CHECK(bad_input([&] { simulate_disaggregated(m, c, cost, prefill, decode, {{0.0, 10, 2}}); }) ==
        "--concurrency: a closed loop's next request waits on the decode pool's finishes, which the pools simulated "
        "one after the other cannot see; give --rate or --trace with disaggregation");
  prefill.engine.concurrency = 0;
  CHECK(bad_input([&] { simulate_disaggregated(m, c, cost, ServingPool{}, ServingPool{}, {{0.0, 10, 1, true}}); }) ==
        "request 0: arrives prefilled with its one output token; nothing is left to decode");
}

TEST_CASE("disaggregated: either pool can be data-parallel attention engines, each pool the group it would be alone") {
  const Model m = model_preset("qwen3-30b-a3b");
  const Cluster c = cluster_preset("dgx-h100");
  const AnalyticCostModel cost;
  ServingPool prefill, decode;
  prefill.dp_attention = 4;  // 4 GPUs, ep 4
  decode.dp_attention = 8;   // 8 GPUs, ep 8
  decode.engine.two_batch_overlap = true;
  CHECK(prefill.gpus() == 4);
  CHECK(decode.gpus() == 8);
  const std::vector<ServingRequest> requests{{0.0, 800, 4}, {0.01, 600, 3}, {0.02, 900, 5}, {0.03, 400, 2}, {0.04, 700, 1}};
  const DisaggregatedResult r = simulate_disaggregated(m, c, cost, prefill, decode, requests);
  // The prefill pool: the group alone on the prompts, one output each.
  std::vector<ServingRequest> prompts = requests;
  for (ServingRequest& q : prompts) q.output_tokens = 1;
  const ServingResult alone = simulate_dp_attention_groups(m, c, cost, prefill.engine, 4, 1, prompts);
  for (size_t i = 0; i < requests.size(); ++i)
    CHECK(r.served.requests[i].first_token_s == Approx(alone.requests[i].first_token_s).epsilon(1e-12));
  // The decode pool: the group alone on the requests of two or more outputs, arriving prefilled after the transfer.
  std::vector<ServingRequest> decodes;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].output_tokens < 2) continue;
    ServingRequest d = requests[i];
    d.prefilled = true;
    d.first_token_s = alone.requests[i].first_token_s;
    d.arrival_s = d.first_token_s + kv_transfer_time(m, d.prompt_tokens, prefill, decode, cost.p2p_link(c.link(0, 4)));
    decodes.push_back(d);
  }
  const ServingResult decoded = simulate_dp_attention_groups(m, c, cost, decode.engine, 8, 1, decodes);
  REQUIRE(decoded.requests.size() == 4);
  for (size_t i = 0, j = 0; i < requests.size(); ++i) {
    if (requests[i].output_tokens < 2) continue;
    CHECK(r.served.requests[i].last_token_s == Approx(decoded.requests[j++].last_token_s).epsilon(1e-12));
  }
  // A decode pool of lockstep engines has no floor for the planner to prune with.
  CHECK(bad_input([&] { decode_pool_floor(m, c, cost, prefill, r.prefill, decode, requests); }) ==
        "a decode pool of data-parallel attention engines has no floor: its step waits on every engine");
}
