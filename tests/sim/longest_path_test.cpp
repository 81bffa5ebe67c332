// Without contention the simulator is a longest-path computation: when no transfer ever waits for its
// send lane or shares a link, the pipeline time is the longest path through the dependency DAG (nodes:
// lowered actions; edges: each rank's order weighted by the compute time of the earlier action, and
// send -> receive weighted by latency + bytes / bandwidth). The check computes that path independently,
// with Boost.Graph's topological sort, on schedules whose every transfer (5 us + 100 kB / 1 GB/s =
// 105 us) is shorter than any compute action (>= 0.25 ms), so a send lane is always free again before
// its rank's next send.
#include <catch2/catch.hpp>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>

#include <iterator>
#include <vector>

#include "sim/pipeline_sim.hpp"
#include "sim_test_util.hpp"

using namespace pw;
using namespace pw::test;

namespace {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, boost::no_property,
                                    boost::property<boost::edge_weight_t, double>>;

double longest_path(const Schedule& s, const std::vector<StageCost>& costs, double transfer_s) {
  std::vector<size_t> offset(s.ranks.size() + 1, 0);
  for (size_t r = 0; r < s.ranks.size(); ++r) offset[r + 1] = offset[r] + s.ranks[r].size();
  Graph g(offset.back());
  std::vector<double> own(offset.back(), 0.0);
  auto duration = [&](const Action& a) {
    const StageCost& c = costs[static_cast<size_t>(a.stage)];
    switch (a.op) {
      case Op::F: return c.forward_s;
      case Op::B: return c.backward_input_s;
      case Op::W: return c.backward_weight_s;
      case Op::BW: return c.backward_input_s + c.backward_weight_s;
      default: return 0.0;
    }
  };
  auto find = [&](const Action& wanted) {
    for (size_t r = 0; r < s.ranks.size(); ++r)
      for (size_t i = 0; i < s.ranks[r].size(); ++i)
        if (s.ranks[r][i] == wanted) return offset[r] + i;
    FAIL("no " << to_text(wanted));
    return size_t{0};
  };
  for (size_t r = 0; r < s.ranks.size(); ++r)
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      const size_t node = offset[r] + i;
      own[node] = duration(a);
      if (i + 1 < s.ranks[r].size()) boost::add_edge(node, node + 1, own[node], g);
      if (a.op == Op::RecvF) boost::add_edge(find(Action{Op::SendF, a.stage - 1, a.microbatch}), node, transfer_s, g);
      if (a.op == Op::RecvB) boost::add_edge(find(Action{Op::SendB, a.stage + 1, a.microbatch}), node, transfer_s, g);
    }
  std::vector<Graph::vertex_descriptor> order;
  boost::topological_sort(g, std::back_inserter(order));
  std::vector<double> start(boost::num_vertices(g), 0.0);
  const auto weight = boost::get(boost::edge_weight, g);
  double makespan = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    for (auto [e, end] = boost::out_edges(*it, g); e != end; ++e)
      start[boost::target(*e, g)] = std::max(start[boost::target(*e, g)], start[*it] + weight[*e]);
    makespan = std::max(makespan, start[*it] + own[*it]);
  }
  return makespan;
}

}  // namespace

TEST_CASE("without contention the pipeline time is the dependency DAG's longest path", "[sim][longest-path]") {
  const double bytes = 1e5, bw = 1e9, lat = 5e-6;
  struct Case {
    const char* name;
    int p, m, v;
    double f, b, w;  // per stage (chunk)
  };
  for (const Case& c : {Case{"gpipe", 4, 6, 1, 1e-3, 1.5e-3, 0.5e-3}, Case{"1f1b", 4, 8, 1, 1e-3, 1.25e-3, 0.75e-3},
                        Case{"interleaved", 4, 8, 2, 0.5e-3, 0.75e-3, 0.25e-3},
                        Case{"zb-h1", 4, 8, 1, 1e-3, 1e-3, 0.5e-3}}) {
    CAPTURE(c.name);
    const Schedule s = lower(generated(c.name, c.p, c.m, c.v));
    auto costs = uniform_costs(c.p * c.v, c.f, c.b, c.w, 0, 0, bytes);
    // Uneven stages make the longest path less regular than the closed forms.
    for (size_t i = 0; i < costs.size(); i += 3) costs[i].forward_s *= 1.5;
    const SimResult r = simulate(sim_input(s, costs, one_node_cluster(bw, lat)));
    CHECK(r.pipeline_time_s == Approx(longest_path(s, costs, lat + bytes / bw)).epsilon(1e-12));
  }
}
