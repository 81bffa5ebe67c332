#pragma once
// The simulator's benchmark workload and its floor, shared by bench/sim_bench.cpp (Google Benchmark, seconds)
// and bench/sim_guard.cpp (the guard CI runs, instruction counts): an interleaved 1F1B schedule, lowered, with
// uniform stage costs, and the same dependency graph as a Boost.Graph DAG whose longest path is the pipeline
// time when no transfer waits for its send lane or shares a link.
//
// The DAG: one node per lowered action; edges along each rank's order (weight: the action's compute
// time; a send or receive does not hold the stream) and from each send to its receive (weight: latency
// + bytes / bandwidth). It ignores what the simulator adds (serial send lanes, bandwidth sharing), so
// its makespan is a lower bound of the simulated pipeline time.
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/topological_sort.hpp>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#include "core/cluster.hpp"
#include "core/stage_costs.hpp"
#include "schedules/generators.hpp"
#include "schedules/ir.hpp"
#include "sim/pipeline_sim.hpp"

namespace pw::bench {

constexpr double kBandwidth = 25e9, kLatency = 5e-6;

struct SimWorkload {
  SimInput input;
  long actions = 0;
};

// p ranks, m micro-batches, v chunks a rank. Per rank: F 4 ms, B 4 ms, W 4 ms, split over the v chunks;
// 16 MB boundary tensors (5 us + 640 us on a link alone); 1 GB of activations per micro-batch and rank.
inline SimWorkload make_workload(int ranks, int microbatches, int chunks) {
  ScheduleSpec spec;
  spec.name = "interleaved";
  spec.ranks = ranks;
  spec.microbatches = microbatches;
  spec.chunks = chunks;
  SimWorkload out;
  out.input.schedule = lower(make_schedule(spec));
  StageCost c;
  c.forward_s = 4e-3 / chunks;
  c.backward_input_s = 4e-3 / chunks;
  c.backward_weight_s = 4e-3 / chunks;
  c.activation_bytes = 1e9 / chunks;
  c.weight_grad_bytes = 0.2e9 / chunks;
  c.output_bytes = 16e6;
  c.grad_reduce_s = 50e-3;
  c.optimizer_s = 10e-3;
  out.input.stages.assign(static_cast<size_t>(ranks * chunks), c);
  Cluster cluster;
  cluster.name = "bench";
  cluster.gpus_per_node = 8;
  cluster.intra_node = LinkSpec{kBandwidth, kLatency};
  cluster.inter_node = LinkSpec{kBandwidth, kLatency};
  out.input.cluster = cluster;
  for (const auto& list : out.input.schedule.ranks) out.actions += static_cast<long>(list.size());
  return out;
}

// The dependency graph as an edge list: one node per lowered action.
struct EdgeList {
  std::size_t nodes = 0;
  std::vector<std::pair<std::size_t, std::size_t>> edges;
  std::vector<double> weights;
  std::vector<double> tail;  // a node's own compute time, added after its last incoming edge
};

inline EdgeList dependency_edges(const SimInput& in) {
  const Schedule& s = in.schedule;
  const int stages = s.num_stages(), m = s.microbatches;
  std::vector<std::size_t> offset(s.ranks.size() + 1, 0);
  for (std::size_t r = 0; r < s.ranks.size(); ++r) offset[r + 1] = offset[r] + s.ranks[r].size();
  EdgeList out;
  out.nodes = offset.back();
  out.tail.assign(out.nodes, 0.0);
  out.edges.reserve(out.nodes * 4 / 3);
  out.weights.reserve(out.nodes * 4 / 3);
  auto duration = [&](const Action& a) {
    const StageCost& c = in.stages[static_cast<size_t>(a.stage)];
    switch (a.op) {
      case Op::F: return c.forward_s;
      case Op::B: return c.backward_input_s;
      case Op::W: return c.backward_weight_s;
      case Op::BW: return c.backward_input_s + c.backward_weight_s;
      default: return 0.0;
    }
  };
  // Sends by (sender stage, micro-batch), per direction, to find each receive's sender.
  std::vector<std::int64_t> send_f(static_cast<size_t>(stages) * m, -1), send_b(static_cast<size_t>(stages) * m, -1);
  for (std::size_t r = 0; r < s.ranks.size(); ++r)
    for (std::size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      const auto node = static_cast<std::int64_t>(offset[r] + i);
      if (a.op == Op::SendF) send_f[static_cast<size_t>(a.stage) * m + a.microbatch] = node;
      if (a.op == Op::SendB) send_b[static_cast<size_t>(a.stage) * m + a.microbatch] = node;
    }
  for (std::size_t r = 0; r < s.ranks.size(); ++r)
    for (std::size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      const std::size_t node = offset[r] + i;
      out.tail[node] = duration(a);
      if (i + 1 < s.ranks[r].size()) {
        out.edges.emplace_back(node, node + 1);
        out.weights.push_back(out.tail[node]);
      }
      if (a.op == Op::RecvF || a.op == Op::RecvB) {
        const int from = a.op == Op::RecvF ? a.stage - 1 : a.stage + 1;
        const std::int64_t sender =
            (a.op == Op::RecvF ? send_f : send_b)[static_cast<size_t>(from) * m + a.microbatch];
        const double bytes = in.stages[static_cast<size_t>(std::min(a.stage, from))].output_bytes;
        out.edges.emplace_back(static_cast<std::size_t>(sender), node);
        out.weights.push_back(kLatency + bytes / kBandwidth);
      }
    }
  return out;
}

using AdjacencyGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                                             boost::property<boost::edge_weight_t, double>>;
struct Weight {
  double w = 0;
};
using CsrGraph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, Weight>;

inline AdjacencyGraph adjacency_graph(const EdgeList& el) {
  AdjacencyGraph g(el.nodes);
  for (std::size_t e = 0; e < el.edges.size(); ++e)
    boost::add_edge(el.edges[e].first, el.edges[e].second, el.weights[e], g);
  return g;
}

inline CsrGraph csr_graph(const EdgeList& el) {
  std::vector<Weight> w(el.weights.size());
  for (std::size_t e = 0; e < w.size(); ++e) w[e].w = el.weights[e];
  return CsrGraph(boost::edges_are_unsorted_multi_pass, el.edges.begin(), el.edges.end(), w.begin(), el.nodes);
}

// Longest path from time 0: topological order, then relax every edge once.
template <class Graph, class WeightMap>
double longest_path(const Graph& g, WeightMap weight, const std::vector<double>& tail) {
  std::vector<typename boost::graph_traits<Graph>::vertex_descriptor> order;
  order.reserve(boost::num_vertices(g));
  boost::topological_sort(g, std::back_inserter(order));  // reverse topological order
  std::vector<double> start(boost::num_vertices(g), 0.0);
  double makespan = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const auto u = *it;
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      const auto v = boost::target(*e, g);
      start[v] = std::max(start[v], start[u] + boost::get(weight, *e));
    }
    makespan = std::max(makespan, start[u] + tail[u]);
  }
  return makespan;
}

}  // namespace pw::bench
