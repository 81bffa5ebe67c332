#pragma once
// A model's layers as a data-flow graph (Boost.Graph): one vertex per layer, the chain edges
// i -> i + 1 carrying each layer's output, and the model's extra edges (skip connections, an encoder
// output read by every decoder layer). A contiguous split relays every tensor through the stages
// between its producer and its last consumer, so what crosses the boundary after layer i depends on
// that boundary alone: each layer u <= i's output once if any of its edges without bytes (the chain
// edge included) reaches past i, plus every edge with bytes of its own that spans i. That keeps the
// partitioner's dynamic programme over prefix sums exact for graphs.
#include <boost/graph/adjacency_list.hpp>

#include <vector>

#include "core/layer_works.hpp"
#include "core/model.hpp"

namespace pw {

struct LayerGraph {
  struct EdgeData {
    double bytes = 0;     // per micro-batch (per tp rank) that the destination receives
    bool shared = true;   // the source's output (relayed once for all such edges), not a tensor of its own
  };
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, boost::no_property, EdgeData>;
  Graph graph;
};

// `output_bytes[i]`: layer i's output (LayerWork::output_bytes), carried by the chain edge and by the
// model's edges from i without bytes. Throws BadInput for an edge that does not go forward inside the
// model.
LayerGraph build_layer_graph(const Model& model, const std::vector<double>& output_bytes);

// Bytes crossing each boundary: element i (0 <= i < layers - 1) is the boundary after layer i.
std::vector<double> cut_bytes(const LayerGraph& graph);

// The same for a model: a chain's boundaries carry each layer's own output (no graph is built);
// a model with edges goes through the graph.
std::vector<double> boundary_bytes(const Model& model, const LayerWorks& work);

}  // namespace pw
