#include <algorithm>

#include "core/error.hpp"
#include "profiler/cuda/host/collectives.hpp"
#include "profiler/cuda/host/cuda_profiler_api.hpp"
#include "profiler/repeat.hpp"

namespace pw {

Cluster measured_cluster(const std::string& name, const GpuSpec& gpu, int gpus, const std::vector<LinkProfile>& links) {
  if (links.empty()) throw_bad_input("measured cluster: no link measured; profile with --links on 2 GPUs or more");
  Cluster c;
  c.name = name;
  c.nodes = 1;
  c.gpus_per_node = gpus;
  c.gpu = gpu;
  std::vector<double> bandwidth, latency;
  for (const LinkProfile& l : links) {
    bandwidth.push_back(l.bandwidth_bytes_per_s);
    latency.push_back(l.latency_s);
  }
  c.intra_node = LinkSpec{median_of(bandwidth), median_of(latency)};
  c.inter_node = c.intra_node;
  if (gpus > 1) c.measured = link_matrix(links, gpus);
  return c;
}

#ifndef PIPEWRIGHT_HAVE_CUDA
CudaProfileResult profile_cuda(const Model&, const CudaProfileRequest&) { throw_bad_input("{}", cuda_not_built_text()); }
#endif

}  // namespace pw
