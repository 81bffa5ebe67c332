// Inter-token latency (ServingResult::token_gaps): every gap between two tokens of a request, so over a run the
// gaps add up to each request's last token less its first, and there is one fewer gap than tokens a request;
// alike on one engine, on replicas and across disaggregated pools (where the second token's gap starts at the
// first token the client got, the cache's transfer inside it).
#include <catch2/catch.hpp>

#include <vector>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "serving/disaggregated_serving.hpp"
#include "serving/gap_counts.hpp"
#include "serving/serving_metrics.hpp"
#include "serving/serving_replicas.hpp"
#include "serving/serving_sim.hpp"
#include "serving/serving_workload.hpp"

using namespace pw;

namespace {

void check_gaps_add_up(const ServingResult& r) {
  double gaps = 0, count = 0, spans = 0, tokens = 0;
  for (const auto& [gap, n] : r.token_gaps) {
    CHECK(gap > 0);
    gaps += gap * static_cast<double>(n);
    count += static_cast<double>(n);
  }
  for (const ServedRequest& q : r.requests) {
    spans += q.last_token_s - q.first_token_s;
    tokens += static_cast<double>(q.output_tokens - 1);
  }
  CHECK(count == tokens);
  CHECK(gaps == Approx(spans).epsilon(1e-9));
  // The token-weighted mean of the gaps is ITL's mean.
  CHECK(serving_metrics(r).itl.mean_s == Approx(spans / tokens).epsilon(1e-9));
}

std::vector<ServingRequest> workload() {
  std::vector<ServingRequest> q;
  for (int i = 0; i < 40; ++i) q.push_back({0.05 * i, 200 + 37 * i, 2 + (i * 7) % 23});
  return q;
}

}  // namespace

TEST_CASE("token gaps add up to each request's first-to-last time, on an engine, replicas and pools") {
  const Model m = model_preset("llama3-8b");
  const Cluster c = cluster_preset("dgx-h100");
  const AnalyticCostModel cost;
  ServingConfig engine;
  engine.max_num_batched_tokens = 512;  // chunked prefills among the decodes
  check_gaps_add_up(simulate_serving(m, c, cost, engine, workload()));
  check_gaps_add_up(simulate_replicas(m, c, cost, engine, 3, workload()));
  ServingPool prefill, decode;
  const DisaggregatedResult d = simulate_disaggregated(m, c, cost, prefill, decode, workload());
  check_gaps_add_up(d.served);
  // One token each: no gap, ITL undefined.
  const ServingResult single = simulate_serving(m, c, cost, engine, {{0, 100, 1}, {0, 50, 1}});
  CHECK(single.token_gaps.empty());
  CHECK(!serving_metrics(single).itl.defined);
}

TEST_CASE("GapCounts: settled, each gap once in increasing order with its count, and refused when read unsettled") {
  GapCounts g;
  g.add(3.0, 1);
  g.add(1.0, 2);
  g.add(3.0, 4);
  CHECK_FALSE(g.settled());
  GapCounts more;
  more.add(2.0, 1);
  more.add(1.0, 1);
  g.add(more);
  g.settle();
  CHECK(g.settled());
  CHECK(std::vector<GapCounts::Entry>(g.begin(), g.end()) == std::vector<GapCounts::Entry>{{1.0, 3}, {2.0, 1}, {3.0, 5}});
  CHECK(g == GapCounts{{3.0, 5}, {1.0, 3}, {2.0, 1}});

  ServingResult r;
  r.requests = {{0, 1, 1, 10, 1, 0}};
  r.token_gaps.add(0.5, 1);
  CHECK_THROWS_WITH(serving_metrics(r), "serving metrics: the token gaps were read before they were settled");
  r.token_gaps.settle();
  CHECK(serving_metrics(r).itl.mean_s == 0.5);
}
