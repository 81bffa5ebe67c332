#include <algorithm>
#include <cctype>

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

std::string chip_of_device(const std::string& device_name) {
  // Words of letters and digits, lower case; the vendor's and product line's names dropped; letter-only words
  // kept until the first with a digit: "NVIDIA GeForce RTX 4090" -> "rtx4090", "NVIDIA A100-SXM4-80GB" -> "a100".
  std::vector<std::string> words(1);
  for (char c : device_name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      words.back() += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!words.back().empty())
      words.emplace_back();
  }
  std::string chip;
  for (const std::string& w : words) {
    if (w.empty() || w == "nvidia" || w == "geforce" || w == "tesla") continue;
    chip += w;
    if (std::any_of(w.begin(), w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) break;
  }
  return chip.empty() ? "gpu" : chip;
}

}  // namespace pw
