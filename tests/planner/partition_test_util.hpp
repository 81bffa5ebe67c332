#pragma once
// Small explicit-cost instances for the partitioner's tests, with exact arithmetic: every time is a
// multiple of 2^-10 s, every size a multiple of 2^10 bytes, links 2^30 B/s with 2^-12 s latency and
// the p2p efficiency 1, so that prefix sums, stage sums and transfer times are all exact in binary
// floating point and ties are true ties.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/error.hpp"
#include "core/model.hpp"
#include "core/stage_costs.hpp"
#include "sim/scenario.hpp"

namespace pw::test {

constexpr double kBandwidth = 1073741824.0;  // 2^30 B/s
constexpr double kLatency = 1.0 / 4096;      // 2^-12 s

inline AnalyticCostModel exact_cost() {
  AnalyticCostParams p;
  p.p2p_efficiency = 1;
  p.memory_reserve_bytes = 0;
  return AnalyticCostModel(p);
}

// Every pipeline rank on its own node: every boundary crosses the network link. No headroom: a plan may
// use the whole `memory_bytes`.
inline Cluster exact_cluster(double memory_bytes) {
  Cluster c;
  c.memory_headroom = 0;
  c.name = "exact";
  c.nodes = 0;
  c.gpus_per_node = 1;
  c.gpu = GpuSpec{"g", 1e15, memory_bytes, 1e12};
  c.intra_node = LinkSpec{kBandwidth, kLatency};
  c.inter_node = LinkSpec{kBandwidth, kLatency};
  return c;
}

inline Layer explicit_layer(const std::string& name, double f, double b, double w, double out, double act,
                            double param_bytes) {
  return Layer{name, LayerKind::Explicit, ExplicitCosts{f, b, w, out, act, param_bytes, std::nullopt}};
}

// n layers with random costs, one of them (random) dominant: F, B, W in [64, 256] x 2^-10 s (the
// dominant one 6x), outputs up to 2^26 bytes (up to 1/16 s on the link), activations and weights up to
// 64 MiB.
inline Model random_model(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int> time(64, 256), size(1, 64), out(1, 65536);
  const int heavy = std::uniform_int_distribution<int>(0, n - 1)(rng);
  Model m;
  m.name = "random";
  for (int i = 0; i < n; ++i) {
    const double scale = i == heavy ? 6.0 : 1.0;
    m.layers.push_back(explicit_layer(fmt::format("l{}", i), scale * time(rng) / 1024.0, scale * time(rng) / 1024.0,
                                      scale * time(rng) / 1024.0, out(rng) * 1024.0, size(rng) * 1048576.0,
                                      size(rng) * 1048576.0));
  }
  return m;
}

inline Scenario scenario_for(const Model& model, const Cluster& cluster, const std::string& schedule, int pp, int vpp,
                             int microbatches) {
  Scenario s;
  s.model = model;
  s.cluster = cluster;
  s.parallel.pp = pp;
  s.parallel.vpp = vpp;
  s.parallel.microbatches = microbatches;
  s.schedule = schedule;
  return resolve(s);
}

// Every split of n layers into `stages` non-empty contiguous ranges, in lexicographic order of cuts.
inline void for_each_split(int n, int stages, const std::function<void(const std::vector<LayerRange>&)>& visit) {
  std::vector<LayerRange> ranges(static_cast<size_t>(stages));
  std::function<void(int, int)> rec = [&](int s, int begin) {
    if (s == stages - 1) {
      ranges[static_cast<size_t>(s)] = LayerRange{begin, n - 1};
      visit(ranges);
      return;
    }
    for (int end = begin + 1; end <= n - (stages - s - 1); ++end) {
      ranges[static_cast<size_t>(s)] = LayerRange{begin, end - 1};
      rec(s + 1, end);
    }
  };
  rec(0, 0);
}

// The bottleneck as the partitioner defines it, from evaluate()'s stage costs: F + B + W, plus on every
// stage whose successor is on another rank the activation forward and the gradient back, each
// latency + bytes / bandwidth.
inline double bottleneck_of(const Evaluation& ev) {
  double worst = 0;
  const int stages = static_cast<int>(ev.stages.size());
  for (int s = 0; s < stages; ++s) {
    const StageCost& c = ev.stages[static_cast<size_t>(s)].cost;
    double t = c.forward_s + c.backward_input_s + c.backward_weight_s;
    if (s + 1 < stages && ev.stages[static_cast<size_t>(s)].rank != ev.stages[static_cast<size_t>(s) + 1].rank)
      t += 2 * (kLatency + c.output_bytes / kBandwidth);
    worst = std::max(worst, t);
  }
  return worst;
}

inline double rank_sum_of(const Evaluation& ev) {
  std::vector<double> sum;
  const int stages = static_cast<int>(ev.stages.size());
  for (int s = 0; s < stages; ++s) {
    const StageCost& c = ev.stages[static_cast<size_t>(s)].cost;
    double t = c.forward_s + c.backward_input_s + c.backward_weight_s;
    if (s + 1 < stages && ev.stages[static_cast<size_t>(s)].rank != ev.stages[static_cast<size_t>(s) + 1].rank)
      t += 2 * (kLatency + c.output_bytes / kBandwidth);
    const size_t r = static_cast<size_t>(ev.stages[static_cast<size_t>(s)].rank);
    if (sum.size() <= r) sum.resize(r + 1, 0.0);
    sum[r] += t;
  }
  return *std::max_element(sum.begin(), sum.end());
}

inline std::string bad_input(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind() == ErrorKind::BadInput ? std::string(e.what()) : "runtime error: " + std::string(e.what());
  }
  return "no error";
}

}  // namespace pw::test
