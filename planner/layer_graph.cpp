#include "planner/layer_graph.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace pw {

LayerGraph build_layer_graph(const Model& model, const std::vector<double>& output_bytes) {
  const int n = model.num_layers();
  if (static_cast<int>(output_bytes.size()) != n)
    throw_runtime("build_layer_graph: {} output sizes for a model of {} layers", output_bytes.size(), n);
  LayerGraph g;
  g.graph = LayerGraph::Graph(static_cast<size_t>(n));
  for (int i = 0; i + 1 < n; ++i)
    boost::add_edge(i, i + 1, LayerGraph::EdgeData{output_bytes[static_cast<size_t>(i)], true}, g.graph);
  for (size_t k = 0; k < model.edges.size(); ++k) {
    const LayerEdge& e = model.edges[k];
    // Contiguous stages run in layer order, so data may only flow to a later layer.
    if (e.from < 0 || e.to >= n || e.from >= e.to)
      throw_bad_input("model '{}': edge {} is [{}, {}]; give layer indices with 0 <= from < to < {} (data flows forward)",
                      model.name, k, e.from, e.to, n);
    const LayerGraph::EdgeData data = e.bytes ? LayerGraph::EdgeData{*e.bytes, false}
                                              : LayerGraph::EdgeData{output_bytes[static_cast<size_t>(e.from)], true};
    boost::add_edge(e.from, e.to, data, g.graph);
  }
  return g;
}

std::vector<double> cut_bytes(const LayerGraph& g) {
  const int n = static_cast<int>(boost::num_vertices(g.graph));
  std::vector<double> cut(static_cast<size_t>(std::max(n - 1, 0)), 0.0);
  for (int u = 0; u < n; ++u) {
    // The source's own output crosses every boundary up to its farthest consumer, once.
    int reach = u;
    double own = 0;
    for (auto [it, end] = boost::out_edges(u, g.graph); it != end; ++it) {
      const LayerGraph::EdgeData& e = g.graph[*it];
      const int v = static_cast<int>(boost::target(*it, g.graph));
      if (e.shared) {
        reach = std::max(reach, v);
        own = e.bytes;
      } else {
        for (int i = u; i < v; ++i) cut[static_cast<size_t>(i)] += e.bytes;
      }
    }
    for (int i = u; i < reach; ++i) cut[static_cast<size_t>(i)] += own;
  }
  return cut;
}

std::vector<double> boundary_bytes(const Model& model, const LayerWorks& work) {
  const int n = model.num_layers();
  if (static_cast<int>(work.size()) != n)
    throw_runtime("boundary_bytes: work for {} layers but the model has {}", work.size(), n);
  std::vector<double> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = work[static_cast<size_t>(i)].output_bytes;
  if (model.edges.empty()) {
    out.resize(static_cast<size_t>(std::max(n - 1, 0)));
    return out;
  }
  return cut_bytes(build_layer_graph(model, out));
}

}  // namespace pw
