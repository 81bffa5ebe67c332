// Disaggregated serving (serving/disaggregated_serving.hpp): a lone request's first token is its prefill on the
// prefill pool, its cache crosses the link, and each next token is one decode on the decode pool; a prefilled
// request decodes at once; a closed loop is refused.
#include <catch2/catch.hpp>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/kv_cache.hpp"
#include "serving/disaggregated_serving.hpp"
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
