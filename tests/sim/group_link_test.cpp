// group_link visits a ring's pairs only until they repeat: the same slowest link as every pair, for rings
// inside a node, across nodes, with a measured matrix at the start, and a dp of 2^31 - 1 at once.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <map>

#include "core/cluster.hpp"
#include "core/stage_costs.hpp"

using namespace pw;

namespace {

// Every pair of the ring, and (without a measured matrix) the rails of the node holding the fewest members,
// counted over every member.
LinkSpec every_pair(const Cluster& c, int first, int stride, int n) {
  LinkSpec slowest{std::numeric_limits<double>::infinity(), 0}, inside{std::numeric_limits<double>::infinity(), 0};
  bool across = false;
  for (int i = 0; i < n; ++i) {
    const LinkSpec l = c.link(first + i * stride, first + ((i + 1) % n) * stride);
    slowest.bandwidth_bytes_per_s = std::min(slowest.bandwidth_bytes_per_s, l.bandwidth_bytes_per_s);
    slowest.latency_s = std::max(slowest.latency_s, l.latency_s);
    if (l.inter_node) across = true;
    else inside.bandwidth_bytes_per_s = std::min(inside.bandwidth_bytes_per_s, l.bandwidth_bytes_per_s);
  }
  std::map<int, int> members;
  for (int i = 0; i < n; ++i) ++members[c.node_of(first + i * stride)];
  int fewest = n;
  for (const auto& [node, count] : members) fewest = std::min(fewest, count);
  if (across && !c.measured && fewest > 1)
    slowest.bandwidth_bytes_per_s = std::min(fewest * slowest.bandwidth_bytes_per_s, inside.bandwidth_bytes_per_s);
  return slowest;
}

Cluster nodes_of(int gpus_per_node) {
  Cluster c;
  c.name = "test";
  c.gpus_per_node = gpus_per_node;
  // Inside a node slower to start, across nodes narrower: the slowest takes one figure from each.
  c.intra_node = LinkSpec{300e9, 9e-6};
  c.inter_node = LinkSpec{25e9, 5e-6};
  return c;
}

}  // namespace

TEST_CASE("group_link: the slowest of every pair of the ring, from the pairs up to where they repeat") {
  for (int g : {1, 4, 6, 8}) {
    Cluster plain = nodes_of(g);
    Cluster measured = nodes_of(g);
    LinkMatrix m;
    m.gpus = 10;
    for (int i = 0; i < m.gpus * m.gpus; ++i) m.links.push_back(LinkSpec{1e9 + i * 1e8, 1e-6 * (i % 7)});
    measured.measured = m;
    for (const Cluster* c : {&plain, &measured})
      for (int first : {0, 1, 3, 7, 12})
        for (int stride : {1, 2, 3, 5, 8, 16})
          for (int n : {1, 2, 3, 7, 20, 41}) {
            INFO("gpus per node " << g << ", first " << first << ", stride " << stride << ", n " << n);
            const LinkSpec fast = group_link(*c, first, stride, n), all = every_pair(*c, first, stride, n);
            if (n <= 1) continue;
            CHECK(fast.bandwidth_bytes_per_s == all.bandwidth_bytes_per_s);
            CHECK(fast.latency_s == all.latency_s);
          }
  }
  // 2^31 - 1 GPUs from 0: full nodes of 8, the last one of 7: seven ports, 175 GB/s.
  const LinkSpec huge = group_link(nodes_of(8), 0, 1, std::numeric_limits<int>::max());
  CHECK(huge.bandwidth_bytes_per_s == 7 * 25e9);
  CHECK(huge.latency_s == 9e-6);
}
