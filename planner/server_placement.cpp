#include "planner/server_placement.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace pw {

std::vector<ServerPlace> place_servers(const ServerSet& set, int gpus_per_node) {
  std::vector<ServerPlace> places;
  for (int e = 0; e < set.count; ++e) {
    const int first = set.first_gpu + e * set.gpus_each;
    ServerPlace p{first / gpus_per_node, first % gpus_per_node, set.gpus_each, 1};
    if (p.local_gpu + set.gpus_each > gpus_per_node) {
      if (p.local_gpu != 0 || set.gpus_each % gpus_per_node != 0)
        throw_bad_input("--export: {} {} ({}, the cluster's GPUs {}-{}) would straddle nodes of {} GPUs without "
                        "filling them, which no launcher places; {}",
                        set.what, e, set.shape, first, first + set.gpus_each - 1, gpus_per_node, set.fix);
      p.nodes = set.gpus_each / gpus_per_node;
    }
    places.push_back(p);
  }
  return places;
}

void check_server_count(int servers, const std::string& fix) {
  if (servers > kMaxServers)
    throw_bad_input("--export: {} servers, more than the {} whose ports the export numbers apart; {}", servers,
                    kMaxServers, fix);
}

std::string nodes_text(int nodes, int gpus_per_node) {
  return std::string("# run each server on its node, in a shell of its own; ") +
         (nodes == 1 ? std::string("NODE0: the node's address (127.0.0.1 with the router on it too)\n")
                     : fmt::format("NODE0..NODE{}: the nodes' addresses (node i holds the\n# cluster's GPUs i x {} to "
                                   "i x {} + {}), reachable from one another and from the router\n",
                                   nodes - 1, gpus_per_node, gpus_per_node, gpus_per_node - 1));
}

std::string gpus_text(const ServerPlace& p) {
  if (p.nodes > 1) return fmt::format("nodes {}-{}, all GPUs", p.node, p.node + p.nodes - 1);
  return p.gpus == 1 ? fmt::format("node {}, GPU {}", p.node, p.local_gpu)
                     : fmt::format("node {}, GPUs {}-{}", p.node, p.local_gpu, p.local_gpu + p.gpus - 1);
}

}  // namespace pw
