#pragma once
// Where the servers of an export run when a plan has several (a disaggregated plan's engines, data-parallel
// attention groups): each on consecutive GPUs of the cluster, inside one node or over whole nodes, with the
// node and first GPU a launcher needs (--base-gpu-id, CUDA_VISIBLE_DEVICES, --nnodes).
#include <string>
#include <vector>

namespace pw {

// Ports are numbered from fixed bases by server; past this many they would run into one another.
inline constexpr int kMaxServers = 10000;

struct ServerPlace {
  int node = 0;       // of its first GPU
  int local_gpu = 0;  // its first GPU's index on that node
  int gpus = 1;
  int nodes = 1;      // above 1: that many whole nodes from `node`
};

// What the servers are, for the refusals: "the decode pool's engine" and "tp 4 x pp 3", and what to do instead.
struct ServerSet {
  std::string what, shape, fix;
  int first_gpu = 0;  // in the cluster
  int gpus_each = 1;
  int count = 1;
};

// BadInput when a server would straddle nodes without filling them.
std::vector<ServerPlace> place_servers(const ServerSet& set, int gpus_per_node);

// BadInput past kMaxServers.
void check_server_count(int servers, const std::string& fix);

// The comment line naming the node addresses the commands use (NODE0, NODE1, ...), for `nodes` nodes.
std::string nodes_text(int nodes, int gpus_per_node);

// "node 0, GPUs 2-3", "node 1, GPU 4" or "nodes 2-3, all GPUs".
std::string gpus_text(const ServerPlace& p);

}  // namespace pw
