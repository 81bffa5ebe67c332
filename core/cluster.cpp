#include "core/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "core/checked_math.hpp"
#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/special_values.hpp"
#include "core/units.hpp"

namespace pw {
namespace {

// Vendor datasheets (dense bf16, HBM capacity and bandwidth, NVLink per GPU per direction) as in
// the design notes' hardware table: A100 SXM 312 TFLOP/s, 40 GB at 1555 GB/s or 80 GB at 2039 GB/s,
// NVLink 3 300 GB/s; H100 SXM 989 TFLOP/s, 80 GB at 3.35 TB/s, NVLink 4 450 GB/s; H200 SXM 141 GB
// at 4.8 TB/s. Dense fp8 is twice bf16 on Hopper (1979 TFLOP/s; the datasheets print the sparse figures,
// twice these); A100 has no fp8. H800 SXM: H100 compute with NVLink 400 GB/s in all (200 per direction;
// NVIDIA H800 datasheet). DGX B200: 2.25 PFLOP/s bf16, 4.5 fp8 dense, 180 GB at 8 TB/s, NVLink 5 1.8 TB/s in
// all (900 GB/s per direction), 400 Gb/s ConnectX-7 per GPU (DGX B200 datasheet). GB200 NVL72: 72 GPUs in
// one NVLink domain, each 2.5 PFLOP/s bf16, 5 fp8 dense, 186 GB at 8 TB/s, 1.8 TB/s NVLink (GB200 NVL72
// specification page; its rack totals / 72); the network between domains taken as 400 Gb/s per GPU.
// Memory is what CUDA lets a process have, PyTorch's "total capacity" (cudaMemGetInfo's total), in bytes. The
// datasheets' "80GB", "141GB", "180GB" are binary: HBM in GiB (AIConfigurator 0.12.0's systems/*.yaml give
// mem_capacity 80 GiB for H100 and A100, 141 GiB for H200, 180 GiB for B200, GB200 189471 MiB as nvidia-smi
// reports it), and the driver keeps a little of it: PyTorch's out-of-memory reports print a total capacity
// of 39.39 GiB (A100 40GB), 79.15 GiB (A100 80GB), 79.11 GiB (H100 and H800), 139.80 GiB (H200), 178.35
// GiB (B200) and 184.31 GiB (GB200). Taking the labels as decimal GB understated every GPU by 6-7%.
// Node network per GPU: one 200 Gb/s HDR InfiniBand NIC per GPU on DGX A100 (25 GB/s), one 400 Gb/s
// NDR NIC per GPU on DGX H100 / HGX H200 (50 GB/s).
// Latencies (alpha per hop): a few microseconds through NVSwitch and 5-10 us over InfiniBand with
// GPUDirect RDMA, the ranges small-message nccl-tests runs and NCCL's tuning model show; these are
// defaults for calibration to replace.

// Bytes of `x` GiB, as PyTorch prints a GPU's capacity (two decimals).
double gib(double x) { return std::round(x * 1073741824.0); }

Cluster dgx(const char* name, const char* gpu, double tflops, double fp8_tflops, double memory, double hbm,
            double nvlink, double network, double intra_latency, double inter_latency, int gpus_per_node = 8) {
  Cluster c;
  c.name = name;
  c.nodes = 0;
  c.gpus_per_node = gpus_per_node;
  c.gpu = GpuSpec{gpu, tflops * 1e12, memory, hbm, fp8_tflops * 1e12};
  c.intra_node = LinkSpec{nvlink, intra_latency};
  c.inter_node = LinkSpec{network, inter_latency};
  return c;
}

// Free, instant communication and unlimited memory: the bound the schedule alone allows.
// The GPU keeps the H100's peak so FLOP arithmetic has a rate.
Cluster ideal() {
  Cluster c = dgx("ideal", "ideal (H100 SXM peak)", 989, 1979, 80e9, 3.35e12, kInf, kInf, 0, 0);
  c.gpus_per_node = 1 << 20;
  c.ideal = true;
  return c;
}

const std::map<std::string, Cluster>& presets() {
  static const std::map<std::string, Cluster> table = {
      {"dgx-a100-40gb", dgx("dgx-a100-40gb", "A100 SXM 40GB", 312, 0, gib(39.39), 1.555e12, 300e9, 25e9, 3e-6, 8e-6)},
      {"dgx-a100-80gb", dgx("dgx-a100-80gb", "A100 SXM 80GB", 312, 0, gib(79.15), 2.039e12, 300e9, 25e9, 3e-6, 8e-6)},
      {"dgx-h100", dgx("dgx-h100", "H100 SXM 80GB", 989, 1979, gib(79.11), 3.35e12, 450e9, 50e9, 2.5e-6, 6e-6)},
      {"dgx-h800", dgx("dgx-h800", "H800 SXM 80GB", 989, 1979, gib(79.11), 3.35e12, 200e9, 50e9, 2.5e-6, 6e-6)},
      {"hgx-h200", dgx("hgx-h200", "H200 SXM 141GB", 989, 1979, gib(139.80), 4.8e12, 450e9, 50e9, 2.5e-6, 6e-6)},
      {"dgx-b200", dgx("dgx-b200", "B200 180GB", 2250, 4500, gib(178.35), 8e12, 900e9, 50e9, 2.5e-6, 6e-6)},
      {"gb200-nvl72", dgx("gb200-nvl72", "B200 (GB200) 186GB", 2500, 5000, gib(184.31), 8e12, 900e9, 50e9, 2.5e-6, 6e-6, 72)},
      {"ideal", ideal()},
  };
  return table;
}

// Bandwidths and capacities may be infinite (the ideal cluster); JSON has no infinity, so it is
// written as the string "inf".
nlohmann::ordered_json number_json(double x) {
  if (std::isinf(x) && x > 0) return "inf";
  return x;
}

// A positive figure within `range`; "inf" where `infinite` allows it.
double read_positive(const JsonFields& f, const std::string& key, const FigureRange& range, bool infinite) {
  const nlohmann::json& v = f.required(key);
  if (infinite && v.is_string() && v.get<std::string>() == "inf") return kInf;
  if (!v.is_number())
    f.fail(key, fmt::format("must be a number{}, got {}", infinite ? " (or \"inf\")" : "", json_excerpt(v)));
  const double x = f.number(key);
  if (!(x > 0)) f.fail(key, fmt::format("must be positive, got {}", x));
  if (x < range.min || x > range.max)
    f.fail(key, fmt::format("is {} {}; give a figure from {} to {} {}{}", x, range.unit, range.min, range.max, range.unit,
                            infinite ? " (or \"inf\")" : ""));
  return x;
}

GpuSpec read_gpu(const JsonFields& g) {
  g.reject_unknown({"name", "peak_tflops", "fp8_peak_tflops", "memory_bytes", "hbm_bytes_per_s"});
  GpuSpec gpu;
  gpu.name = g.string("name");
  gpu.peak_flops = read_positive(g, "peak_tflops", kPeakTflopsRange, false) * 1e12;
  if (g.has("fp8_peak_tflops")) gpu.fp8_peak_flops = read_positive(g, "fp8_peak_tflops", kPeakTflopsRange, false) * 1e12;
  gpu.memory_bytes = read_positive(g, "memory_bytes", kBytesRange, true);
  gpu.hbm_bytes_per_s = read_positive(g, "hbm_bytes_per_s", kBandwidthRange, true);
  return gpu;
}

nlohmann::ordered_json gpu_json(const GpuSpec& gpu) {
  nlohmann::ordered_json j = {{"name", gpu.name}, {"peak_tflops", gpu.peak_flops / 1e12}};
  if (gpu.fp8_peak_flops > 0) j["fp8_peak_tflops"] = gpu.fp8_peak_flops / 1e12;
  j["memory_bytes"] = number_json(gpu.memory_bytes);
  j["hbm_bytes_per_s"] = number_json(gpu.hbm_bytes_per_s);
  return j;
}

LinkSpec read_link(const JsonFields& parent, const std::string& key) {
  const JsonFields f = parent.object(key);
  f.reject_unknown({"bandwidth_bytes_per_s", "latency_s"});
  return LinkSpec{read_positive(f, "bandwidth_bytes_per_s", kBandwidthRange, true), f.figure("latency_s", kSecondsRange)};
}

LinkMatrix read_measured(const JsonFields& parent) {
  const JsonFields f = parent.object("measured_links");
  f.reject_unknown({"gpus", "bandwidth_bytes_per_s", "latency_s"});
  LinkMatrix m;
  m.gpus = f.count("gpus", kMaxNodes, "GPUs");
  // Both matrices are checked square before the gpus x gpus links are allocated: the file then holds
  // that many numbers itself.
  for (const char* key : {"bandwidth_bytes_per_s", "latency_s"}) {
    const nlohmann::json& rows = f.required(key);
    if (!rows.is_array() || rows.size() != static_cast<size_t>(m.gpus))
      f.fail(key, fmt::format("must be a {0} x {0} array of numbers", m.gpus));
    for (int a = 0; a < m.gpus; ++a)
      if (!rows[a].is_array() || rows[a].size() != static_cast<size_t>(m.gpus))
        f.fail(key, fmt::format("must be a {0} x {0} array of numbers (row {1} is not)", m.gpus, a));
  }
  m.links.assign(static_cast<size_t>(m.gpus) * m.gpus, LinkSpec{});
  for (const char* key : {"bandwidth_bytes_per_s", "latency_s"}) {
    const nlohmann::json& rows = f.required(key);
    const bool bandwidth = std::string(key) == "bandwidth_bytes_per_s";
    for (int a = 0; a < m.gpus; ++a) {
      const nlohmann::json& row = rows[a];
      for (int b = 0; b < m.gpus; ++b) {
        const std::string cell = fmt::format("{}[{}][{}]", key, a, b);
        if (!row[b].is_number()) f.fail(cell, fmt::format("must be a number, got {}", json_excerpt(row[b])));
        const double x = row[b].get<double>();
        // A GPU's link to itself is never used, so its bandwidth may be given as 0.
        const bool ok = bandwidth ? (a == b ? x >= 0 : x > 0) : x >= 0;
        if (!ok) f.fail(cell, fmt::format("must be {}, got {}", bandwidth ? "positive" : "non-negative", x));
        const FigureRange& range = bandwidth ? kBandwidthRange : kSecondsRange;
        if (!is_normal_or_zero(x) || (x > 0 && x < range.min) || x > range.max)
          f.fail(cell, fmt::format("is {} {}; give a figure from {} to {} {}", x, range.unit, range.min, range.max,
                                   range.unit));
        LinkSpec& link = m.links[static_cast<size_t>(a) * m.gpus + b];
        (bandwidth ? link.bandwidth_bytes_per_s : link.latency_s) = x;
      }
    }
  }
  return m;
}

}  // namespace

LinkSpec slower(const LinkSpec& a, const LinkSpec& b) {
  return LinkSpec{std::min(a.bandwidth_bytes_per_s, b.bandwidth_bytes_per_s), std::max(a.latency_s, b.latency_s),
                  a.inter_node || b.inter_node};
}

LinkSpec with_rails(LinkSpec slowest, const LinkSpec& inside, int per_node) {
  if (slowest.inter_node && per_node > 1)
    slowest.bandwidth_bytes_per_s = std::min(per_node * slowest.bandwidth_bytes_per_s, inside.bandwidth_bytes_per_s);
  return slowest;
}

int fewest_members_per_node(const Cluster& cluster, int n, const std::function<long(int)>& member) {
  if (n < 1) return 1;
  const long per = cluster.gpus_per_node;
  const int read = static_cast<int>(std::min<long>(n, 4 * per + 1));
  // Members come in increasing GPU order, so a node's members are one run: count the runs of the sample.
  int fewest = n, run = 0;
  for (int i = 0; i < read; ++i) {
    ++run;
    const bool last_of_node = i + 1 == read || member(i + 1) / per != member(i) / per;
    // The sample's last run may go on past it: the group's own last node is counted below instead.
    if (last_of_node && (i + 1 < read || read == n)) fewest = std::min(fewest, run);
    if (last_of_node) run = 0;
  }
  if (read < n) {  // the group's last node may hold fewer (a partial one)
    int last = 0;
    for (int i = n - 1; i >= 0 && member(i) / per == member(n - 1) / per; --i) ++last;
    fewest = std::min(fewest, last);
  }
  return std::max(fewest, 1);
}

LinkSpec Cluster::link(int a, int b) const {
  const bool across = node_of(a) != node_of(b);
  LinkSpec l = measured && a >= 0 && b >= 0 && a < measured->gpus && b < measured->gpus ? measured->at(a, b)
               : across                                                                  ? inter_node
                                                                                         : intra_node;
  l.inter_node = across;
  return l;
}

const GpuSpec& Cluster::gpu_at(int global_rank) const {
  if (node_groups.empty()) return gpu;
  int node = node_of(global_rank);
  if (global_rank >= 0)
    for (const NodeGroup& g : node_groups) {
      if (node < g.nodes) return g.gpu;
      node -= g.nodes;
    }
  throw_runtime("cluster '{}': GPU {} is outside its {} nodes of {} GPUs", name, global_rank, nodes, gpus_per_node);
}

double Cluster::memory_capacity() const {
  if (ideal) return kInf;
  double capacity = gpu.memory_bytes;
  for (const NodeGroup& g : node_groups) capacity = std::min(capacity, g.gpu.memory_bytes);
  return capacity;
}

double Cluster::memory_capacity_at(int global_rank) const { return ideal ? kInf : gpu_at(global_rank).memory_bytes; }

double Cluster::memory_limit() const { return memory_capacity() * (1 - memory_headroom); }

double Cluster::memory_limit_at(int global_rank) const { return memory_capacity_at(global_rank) * (1 - memory_headroom); }

std::string Cluster::memory_limit_text(double limit) const {
  if (std::isinf(limit)) return "no limit";
  if (memory_headroom == 0) return format_bytes(limit);
  return fmt::format("{} ({} less the {:g}% headroom)", format_bytes(limit), format_bytes(limit / (1 - memory_headroom)),
                     memory_headroom * 100);
}

void Cluster::check_capacity(int gpus) const {
  if (nodes <= 0) return;
  const long have = static_cast<long>(nodes) * gpus_per_node;
  if (gpus > have)
    throw_bad_input(
        "tp x cp x pp x dp = {} GPUs but cluster '{}' has {} ({} x {}); use fewer GPUs or a cluster file with more nodes",
        gpus, name, have, nodes, gpus_per_node);
}

std::vector<std::string> cluster_preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, cluster] : presets()) names.push_back(name);
  return names;
}

Cluster cluster_preset(const std::string& name) {
  const auto it = presets().find(name);
  if (it == presets().end()) {
    std::string known;
    for (const std::string& n : cluster_preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw_bad_input("unknown cluster '{}'; known clusters: {} (or give a path to a cluster JSON file)", name, known);
  }
  return it->second;
}

// A mixed cluster lists its node groups in node order instead of one "gpu":
//   "node_groups": [{"nodes": 2, "gpu": {...A100...}}, {"nodes": 2, "gpu": {...H100...}}]
// (nodes 0-1 hold A100s, nodes 2-3 H100s). "nodes" may then be left out; given, it must be their sum.
Cluster cluster_from_json_text(const std::string& text, const std::string& source) {
  const nlohmann::json j = parse_json_text(text, source);
  const JsonFields f(j, source);
  f.reject_unknown({"name", "nodes", "gpus_per_node", "gpu", "node_groups", "intra_node", "inter_node", "ideal",
                    "measured_links", "memory_headroom"});
  Cluster c;
  c.name = f.string("name");
  c.gpus_per_node = f.count("gpus_per_node", kMaxGpusPerNode, "GPUs");
  if (f.has("node_groups")) {
    if (f.has("gpu"))
      throw_bad_input("{}: give either \"gpu\" (one GPU type) or \"node_groups\" (mixed types), not both", source);
    const nlohmann::json& groups = f.required("node_groups");
    if (!groups.is_array() || groups.empty())
      f.fail("node_groups", "must be a non-empty array of {\"nodes\": N, \"gpu\": {...}} objects");
    f.array("node_groups", kMaxNodes, "node groups");
    int total = 0;
    for (size_t i = 0; i < groups.size(); ++i) {
      const JsonFields gf(groups[i], source, fmt::format("node_groups[{}].", i));
      gf.reject_unknown({"nodes", "gpu"});
      NodeGroup group;
      group.nodes = gf.count("nodes", kMaxNodes, "nodes");
      group.gpu = read_gpu(gf.object("gpu"));
      total += group.nodes;
      if (total > kMaxNodes)
        gf.fail("nodes", fmt::format("brings the node groups to {} nodes, above the cap of {}; give fewer", total,
                                     kMaxNodes));
      c.node_groups.push_back(group);
    }
    c.nodes = total;
    if (f.has("nodes") && f.non_negative_integer("nodes") != total)
      f.fail("nodes", fmt::format("is {} but the node groups hold {} nodes; give {} or leave it out",
                                  f.non_negative_integer("nodes"), total, total));
    c.gpu = c.node_groups.front().gpu;
  } else {
    if (f.non_negative_integer("nodes") > kMaxNodes) f.count("nodes", kMaxNodes, "nodes");
    c.nodes = static_cast<int>(f.non_negative_integer("nodes"));
    c.gpu = read_gpu(f.object("gpu"));
  }
  c.intra_node = read_link(f, "intra_node");
  c.inter_node = read_link(f, "inter_node");
  c.ideal = f.boolean("ideal", false);
  if (f.has("measured_links")) c.measured = read_measured(f);
  if (f.has("memory_headroom")) {
    c.memory_headroom = f.number("memory_headroom");
    if (!(c.memory_headroom >= 0 && c.memory_headroom <= kMaxMemoryHeadroom))
      f.fail("memory_headroom", fmt::format("is {}; give the share of each GPU's memory to keep free, from 0 to {}",
                                            c.memory_headroom, kMaxMemoryHeadroom));
  }
  return c;
}

Cluster load_cluster(const std::string& name_or_path) {
  if (names_a_file(name_or_path))
    return cluster_from_json_text(read_text_file(name_or_path, "cluster", kMaxModelFileBytes), name_or_path);
  return cluster_preset(name_or_path);
}

std::string cluster_to_json_text(const Cluster& c) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["nodes"] = c.nodes;
  j["gpus_per_node"] = c.gpus_per_node;
  if (c.node_groups.empty()) {
    j["gpu"] = gpu_json(c.gpu);
  } else {
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (const NodeGroup& g : c.node_groups) groups.push_back({{"nodes", g.nodes}, {"gpu", gpu_json(g.gpu)}});
    j["node_groups"] = groups;
  }
  const auto link = [](const LinkSpec& l) {
    return nlohmann::ordered_json{{"bandwidth_bytes_per_s", number_json(l.bandwidth_bytes_per_s)},
                                  {"latency_s", l.latency_s}};
  };
  j["intra_node"] = link(c.intra_node);
  j["inter_node"] = link(c.inter_node);
  if (c.ideal) j["ideal"] = true;
  if (c.memory_headroom != kDefaultMemoryHeadroom) j["memory_headroom"] = c.memory_headroom;
  if (c.measured) {
    nlohmann::ordered_json bw = nlohmann::ordered_json::array(), lat = nlohmann::ordered_json::array();
    for (int a = 0; a < c.measured->gpus; ++a) {
      nlohmann::ordered_json bw_row = nlohmann::ordered_json::array(), lat_row = nlohmann::ordered_json::array();
      for (int b = 0; b < c.measured->gpus; ++b) {
        bw_row.push_back(c.measured->at(a, b).bandwidth_bytes_per_s);
        lat_row.push_back(c.measured->at(a, b).latency_s);
      }
      bw.push_back(bw_row);
      lat.push_back(lat_row);
    }
    j["measured_links"] = {{"gpus", c.measured->gpus}, {"bandwidth_bytes_per_s", bw}, {"latency_s", lat}};
  }
  return json_file_text(j, "cluster");
}

}  // namespace pw
