#pragma once
// A cluster: nodes of GPUs joined by an intra-node fabric (NVLink) and an inter-node network.
// Bandwidths are per GPU and per direction, in bytes per second.
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pw {

struct GpuSpec {
  std::string name;
  double peak_flops = 0;       // dense bf16, FLOP/s
  double memory_bytes = 0;     // usable HBM
  double hbm_bytes_per_s = 0;
  double fp8_peak_flops = 0;   // dense fp8, FLOP/s; 0: no fp8 tensor cores (A100)
};

// A run of consecutive nodes with one GPU type: a mixed cluster is a list of them, in node order.
struct NodeGroup {
  int nodes = 0;
  GpuSpec gpu;
};

struct LinkSpec {
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
  // Between GPUs of different nodes (set by Cluster::link): the network. A profile of one node measures
  // none of these, so the cost models that replace links with measured ones leave these alone.
  bool inter_node = false;
};

// A ring or group over both links' hops: the lower bandwidth, the higher latency, across nodes if either is.
LinkSpec slower(const LinkSpec& a, const LinkSpec& b);

// A collective ring's slowest hop `slowest` (across nodes) for a group with `per_node` members in each node it
// spans, whose hops inside a node are no slower than `inside`. Rails: every GPU has a network port of its own
// (one NIC per GPU on DGX and HGX nodes) and NCCL splits a collective over channels whose rings leave each
// node through different GPUs, so a group with k members a node drives k ports at once: its network hops
// carry k times one port's bandwidth, as far as the links inside the node feed them. One member a node, or a
// ring inside one node: the hop as it is.
LinkSpec with_rails(LinkSpec slowest, const LinkSpec& inside, int per_node);


// Measured per-pair links (the profiler writes them); overrides the class defaults where present.
struct LinkMatrix {
  int gpus = 0;  // square, gpus x gpus, row-major
  std::vector<LinkSpec> links;
  const LinkSpec& at(int a, int b) const { return links[static_cast<size_t>(a) * gpus + b]; }
};

// The share of each GPU's memory a plan leaves free: the caching allocator's fragmentation and what
// the communication libraries allocate as they run, which no tensor count sees. 2% is the largest round
// share under which every published run that ran on 80 GB GPUs still fits as simulated
// (docs/cost-model.md#the-memory-headroom); --memory-headroom or a cluster file's "memory_headroom" sets it.
inline constexpr double kDefaultMemoryHeadroom = 0.02;
inline constexpr double kMaxMemoryHeadroom = 0.5;

struct Cluster {
  std::string name;
  int nodes = 0;  // 0: as many as a configuration needs
  int gpus_per_node = 8;
  GpuSpec gpu;
  LinkSpec intra_node;
  LinkSpec inter_node;
  bool ideal = false;  // free, instant communication and no memory limit
  std::optional<LinkMatrix> measured;
  // Mixed GPU types (the cluster JSON's "node_groups" instead of "gpu"): node 0 onwards, group by
  // group. Empty: every node has `gpu`. When set, `nodes` is their sum and `gpu` the first group's
  // GPU, for code that reads one GPU type (such code should use gpu_at).
  std::vector<NodeGroup> node_groups;
  double memory_headroom = kDefaultMemoryHeadroom;  // share of each GPU's memory kept free, 0 to kMaxMemoryHeadroom

  int node_of(int global_rank) const { return global_rank / gpus_per_node; }
  // The GPU type at a global rank. Throws a runtime error for a rank past the node groups
  // (check_capacity() rejects such configurations first).
  const GpuSpec& gpu_at(int global_rank) const;
  // The link between two GPUs (global ranks); the measured matrix wins where it covers both.
  LinkSpec link(int a, int b) const;
  // What a plan may use of a GPU: its memory less the headroom; infinity for the ideal cluster. With node
  // groups, the smallest of theirs.
  double memory_limit() const;
  // What a plan may use of the GPU at a global rank (its own type's memory less the headroom).
  double memory_limit_at(int global_rank) const;
  // The GPU's whole memory, headroom included (what the vendor states); infinity for the ideal cluster.
  double memory_capacity() const;
  double memory_capacity_at(int global_rank) const;
  // A limit memory_limit*() gave, for people: "78.4 GB (80.0 GB less the 2% headroom)", "80.0 GB" without
  // headroom, "no limit" for infinity.
  std::string memory_limit_text(double limit) const;
  // Throws BadInput when `gpus` GPUs do not fit (fixed node count too small).
  void check_capacity(int gpus) const;
};

// The fewest members any node holds of a group whose i-th member is the GPU member(i), i < n, increasing:
// with_rails' k. Evenly placed members repeat their pattern within a node's worth of them, so a huge group is
// read up to a few nodes' worth, and its last node on its own (a partly read node left out).
int fewest_members_per_node(const Cluster& cluster, int n, const std::function<long(int)>& member);

std::vector<std::string> cluster_preset_names();
Cluster cluster_preset(const std::string& name);
Cluster cluster_from_json_text(const std::string& text, const std::string& source);
Cluster load_cluster(const std::string& name_or_path);
std::string cluster_to_json_text(const Cluster& cluster);

}  // namespace pw
