#pragma once
// Two nodes of four 24 GB GPUs: small enough that memory decides many of the search's candidates.
#include "core/cluster.hpp"

namespace pw::test {

inline Cluster small_cluster() {
  return cluster_from_json_text(R"({"name": "4x24gb", "nodes": 2, "gpus_per_node": 4,
      "gpu": {"name": "24GB", "peak_tflops": 300, "memory_bytes": 24e9, "hbm_bytes_per_s": 2e12},
      "intra_node": {"bandwidth_bytes_per_s": 2e11, "latency_s": 3e-6},
      "inter_node": {"bandwidth_bytes_per_s": 2.5e10, "latency_s": 8e-6}})",
                                "small cluster");
}

}  // namespace pw::test
