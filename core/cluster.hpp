#pragma once
// A cluster: nodes of GPUs joined by an intra-node fabric (NVLink) and an inter-node network.
// Bandwidths are per GPU and per direction, in bytes per second.
#include <optional>
#include <string>
#include <vector>

namespace pw {

struct GpuSpec {
  std::string name;
  double peak_flops = 0;       // dense bf16, FLOP/s
  double memory_bytes = 0;     // usable HBM
  double hbm_bytes_per_s = 0;
};

struct LinkSpec {
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
};

// Measured per-pair links (the profiler writes them); overrides the class defaults where present.
struct LinkMatrix {
  int gpus = 0;  // square, gpus x gpus, row-major
  std::vector<LinkSpec> links;
  const LinkSpec& at(int a, int b) const { return links[static_cast<size_t>(a) * gpus + b]; }
};

struct Cluster {
  std::string name;
  int nodes = 0;  // 0: as many as a configuration needs
  int gpus_per_node = 8;
  GpuSpec gpu;
  LinkSpec intra_node;
  LinkSpec inter_node;
  bool ideal = false;  // free, instant communication and no memory limit
  std::optional<LinkMatrix> measured;

  int node_of(int global_rank) const { return global_rank / gpus_per_node; }
  // The link between two GPUs (global ranks); the measured matrix wins where it covers both.
  LinkSpec link(int a, int b) const;
  // Memory limit of a GPU; infinity for the ideal cluster.
  double memory_limit() const;
  // Throws BadInput when `gpus` GPUs do not fit (fixed node count too small).
  void check_capacity(int gpus) const;
};

std::vector<std::string> cluster_preset_names();
Cluster cluster_preset(const std::string& name);
Cluster cluster_from_json_text(const std::string& text, const std::string& source);
Cluster load_cluster(const std::string& name_or_path);
std::string cluster_to_json_text(const Cluster& cluster);

}  // namespace pw
