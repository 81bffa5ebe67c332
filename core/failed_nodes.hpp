#pragma once
// The cluster a run is left with when some of its nodes fail: those nodes gone, the others in their order
// with their GPU types (node groups) and measured links, so that a re-plan places ranks on what is left.
#include <vector>

#include "core/cluster.hpp"

namespace pw {

// `used_nodes`: the nodes the run holds (0 .. used_nodes - 1); `failed`: indices among them. BadInput naming
// --failed-nodes for an index past the run's nodes or listed twice, and when every node fails. The result
// has exactly the nodes left (nodes = used_nodes - failed).
Cluster without_nodes(const Cluster& c, int used_nodes, const std::vector<int>& failed);

// The same without the run's last `k` nodes (what a what-if that names no node takes away).
Cluster without_last_nodes(const Cluster& c, int used_nodes, int k);

}  // namespace pw
