#include "serving/disaggregated_serving.hpp"

#include <algorithm>
#include <limits>

#include "core/checked_math.hpp"
#include "core/error.hpp"
#include "core/kv_cache.hpp"
#include "serving/dp_attention_serving.hpp"
#include "serving/serving_replicas.hpp"

namespace pw {
namespace {

void refuse_closed_loop(const ServingPool& pool) {
  if (pool.engine.concurrency > 0)
    throw_bad_input("--concurrency: a closed loop's next request waits on the decode pool's finishes, which the "
                    "pools simulated one after the other cannot see; give --rate or --trace with disaggregation");
}

// A pool's GPUs, refused past half the int range so that both pools' sum stays a count (ServingPool::gpus).
void check_pool_gpus(const ServingPool& pool, const char* what, const char* fix) {
  bounded_product({pool.engine.tp, pool.engine.pp, pool.dp_attention, pool.replicas}, std::numeric_limits<int>::max() / 2,
                  what, fix);
}

// The requests the decode pool serves (those with two or more outputs, arriving prefilled when their first token
// and their KV cache's transfer are done), which request each is, and the transfers' seconds over all requests.
struct DecodeArrivals {
  std::vector<ServingRequest> decodes;
  std::vector<size_t> decoded;
  double transfer_s = 0;
};
DecodeArrivals decode_arrivals(const Model& model, const ServingPool& prefill, const ServingResult& prefilled,
                               const ServingPool& decode, const std::vector<ServingRequest>& requests,
                               const LinkSpec& kv_link) {
  DecodeArrivals out;
  for (size_t i = 0; i < requests.size(); ++i) {
    const double t = kv_transfer_time(model, requests[i].prompt_tokens, prefill, decode, kv_link);
    out.transfer_s += t;
    if (requests[i].output_tokens < 2) continue;
    ServingRequest d = requests[i];
    d.arrival_s = prefilled.requests[i].first_token_s + t;
    d.prefilled = true;
    d.first_token_s = prefilled.requests[i].first_token_s;
    out.decodes.push_back(d);
    out.decoded.push_back(i);
  }
  return out;
}

}  // namespace

double kv_transfer_time(const Model& model, long prompt_tokens, const ServingPool& prefill, const ServingPool& decode,
                        const LinkSpec& link) {
  const double bytes = kv_bytes_for_tokens(model, {0, model.num_layers() - 1}, 1, prompt_tokens, prefill.engine.kv_dtype);
  const int pairs = std::min(prefill.engine.tp * prefill.engine.pp, decode.engine.tp * decode.engine.pp);
  return link.latency_s + bytes / (link.bandwidth_bytes_per_s * pairs);
}

ServingResult simulate_prefill_pool(const Model& model, const Cluster& cluster, const CostModel& cost,
                                    const ServingPool& prefill, const std::vector<ServingRequest>& requests) {
  refuse_closed_loop(prefill);
  if (prefill.replicas < 1) throw_bad_input("--prefill-replicas: must be at least 1, got {}", prefill.replicas);
  check_pool_gpus(prefill, "GPUs of the prefill pool, --prefill-tp x --prefill-pp x --prefill-dp-attention x --prefill-replicas",
                  "use fewer prefill replicas");
  std::vector<ServingRequest> prompts = requests;
  for (ServingRequest& r : prompts) r.output_tokens = 1;
  return simulate_pool(model, cluster, cost, prefill, prompts);
}

ServingResult simulate_pool(const Model& model, const Cluster& cluster, const CostModel& cost, const ServingPool& pool,
                            const std::vector<ServingRequest>& requests) {
  return pool.dp_attention > 1
             ? simulate_dp_attention_groups(model, cluster, cost, pool.engine, pool.dp_attention, pool.replicas, requests)
             : simulate_replicas(model, cluster, cost, pool.engine, pool.replicas, requests);
}

DisaggregatedResult simulate_decode_pool(const Model& model, const Cluster& cluster, const CostModel& cost,
                                         const ServingPool& prefill, const ServingResult& prefilled,
                                         const ServingPool& decode, const std::vector<ServingRequest>& requests) {
  refuse_closed_loop(decode);
  if (decode.replicas < 1) throw_bad_input("--replicas: must be at least 1, got {}", decode.replicas);
  check_pool_gpus(decode, "GPUs of the decode pool, --tp x --pp x --dp-attention x --replicas", "use fewer replicas");
  cluster.check_capacity(prefill.gpus() + decode.gpus());
  DisaggregatedResult out;
  out.prefill = prefilled;
  out.kv_link = cost.p2p_link(cluster.link(0, prefill.gpus()));
  const auto [decodes, decoded, transfer] = decode_arrivals(model, prefill, prefilled, decode, requests, out.kv_link);
  out.kv_transfer_s = requests.empty() ? 0 : transfer / static_cast<double>(requests.size());
  if (!decodes.empty()) out.decode = simulate_pool(model, cluster, cost, decode, decodes);

  out.served.requests.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    ServedRequest& s = out.served.requests[i];
    s.arrival_s = requests[i].arrival_s;
    s.first_token_s = s.last_token_s = out.prefill.requests[i].first_token_s;
    s.prompt_tokens = requests[i].prompt_tokens;
    s.output_tokens = requests[i].output_tokens;
    s.preemptions = out.prefill.requests[i].preemptions;
  }
  for (size_t j = 0; j < decoded.size(); ++j) {
    ServedRequest& s = out.served.requests[decoded[j]];
    s.last_token_s = out.decode.requests[j].last_token_s;
    s.preemptions += out.decode.requests[j].preemptions;
  }
  for (const ServedRequest& s : out.served.requests) out.served.makespan_s = std::max(out.served.makespan_s, s.last_token_s);
  out.served.preemptions = out.prefill.preemptions + out.decode.preemptions;
  out.served.token_gaps = out.decode.token_gaps;  // the prefill pool makes first tokens only
  out.served.batches = out.prefill.batches + out.decode.batches;
  return out;
}

ServingFloor decode_pool_floor(const Model& model, const Cluster& cluster, const CostModel& cost,
                               const ServingPool& prefill, const ServingResult& prefilled, const ServingPool& decode,
                               const std::vector<ServingRequest>& requests) {
  if (decode.dp_attention > 1)
    throw_bad_input("a decode pool of data-parallel attention engines has no floor: its step waits on every engine");
  const LinkSpec kv_link = cost.p2p_link(cluster.link(0, prefill.gpus()));
  return serving_floor(model, cluster, cost, decode.engine,
                       decode_arrivals(model, prefill, prefilled, decode, requests, kv_link).decodes);
}

DisaggregatedResult simulate_disaggregated(const Model& model, const Cluster& cluster, const CostModel& cost,
                                           const ServingPool& prefill, const ServingPool& decode,
                                           const std::vector<ServingRequest>& requests) {
  return simulate_decode_pool(model, cluster, cost, prefill, simulate_prefill_pool(model, cluster, cost, prefill, requests),
                              decode, requests);
}

}  // namespace pw
