#include "core/failed_nodes.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace pw {

Cluster without_nodes(const Cluster& c, int used_nodes, const std::vector<int>& failed) {
  if (c.nodes > 0 && used_nodes > c.nodes)
    throw_runtime("without_nodes: the run holds {} nodes but cluster '{}' has {}", used_nodes, c.name, c.nodes);
  std::vector<char> gone(static_cast<size_t>(used_nodes), 0);
  for (int n : failed) {
    if (n < 0 || n >= used_nodes)
      throw_bad_input("--failed-nodes: node {} is not one of the run's nodes, 0 to {}; give indices in that range", n,
                      used_nodes - 1);
    if (gone[static_cast<size_t>(n)]) throw_bad_input("--failed-nodes: node {} is listed twice; list each node once", n);
    gone[static_cast<size_t>(n)] = 1;
  }
  const int left = used_nodes - static_cast<int>(failed.size());
  if (left < 1) throw_bad_input("--failed-nodes: all {} nodes of the run failed; nothing is left to re-plan on", used_nodes);

  Cluster out = c;
  out.nodes = left;
  if (!c.node_groups.empty()) {
    out.node_groups.clear();
    int node = 0;
    for (const NodeGroup& g : c.node_groups) {
      int kept = 0;
      for (int i = 0; i < g.nodes; ++i, ++node)
        if (node < used_nodes && !gone[static_cast<size_t>(node)]) ++kept;
      // Consecutive groups of one GPU type stay apart: the cluster file listed them so.
      if (kept > 0) out.node_groups.push_back(NodeGroup{kept, g.gpu});
    }
    out.gpu = out.node_groups.front().gpu;
  }
  if (c.measured) {
    const int per = c.gpus_per_node;
    std::vector<int> keep;  // old GPU index of each new one
    for (int n = 0; n < used_nodes; ++n)
      if (!gone[static_cast<size_t>(n)])
        for (int g = 0; g < per && n * per + g < c.measured->gpus; ++g) keep.push_back(n * per + g);
    LinkMatrix m;
    m.gpus = static_cast<int>(keep.size());
    for (int a : keep)
      for (int b : keep) m.links.push_back(c.measured->at(a, b));
    out.measured = std::move(m);
  }
  return out;
}

Cluster without_last_nodes(const Cluster& c, int used_nodes, int k) {
  std::vector<int> failed;
  for (int n = used_nodes - k; n < used_nodes; ++n) failed.push_back(n);
  return without_nodes(c, used_nodes, failed);
}

}  // namespace pw
