#include <catch2/catch.hpp>

#include "../error_text.hpp"

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "core/cluster.hpp"
#include "core/error.hpp"

using namespace pw;

namespace {

// A valid 2 x 4 cluster whose intra-node bandwidth is the given JSON text, with `extra` fields appended.
std::string cluster_text(const std::string& intra_bandwidth = "450e9", const std::string& extra = "") {
  return R"({"name": "c", "nodes": 2, "gpus_per_node": 4,
             "gpu": {"name": "g", "peak_tflops": 100, "memory_bytes": 1e10, "hbm_bytes_per_s": 1e12},
             "intra_node": {"bandwidth_bytes_per_s": )" +
         intra_bandwidth + R"(, "latency_s": 1e-6},
             "inter_node": {"bandwidth_bytes_per_s": 25e9, "latency_s": 5e-6})" +
         extra + "}";
}

}  // namespace

TEST_CASE("cluster presets carry the vendor numbers") {
  CHECK(cluster_preset_names() ==
        std::vector<std::string>{"dgx-a100-40gb", "dgx-a100-80gb", "dgx-b200", "dgx-h100", "dgx-h800", "gb200-nvl72", "hgx-h200", "ideal"});
  const Cluster a = cluster_preset("dgx-a100-40gb");
  CHECK(a.gpus_per_node == 8);
  CHECK(a.gpu.peak_flops == 312e12);
  // Memory as CUDA gives it a process (PyTorch's "total capacity"), GiB to the byte: 39.39 GiB of "40GB".
  CHECK(a.gpu.memory_bytes == 42294690447.0);
  CHECK(a.intra_node.bandwidth_bytes_per_s == 300e9);
  CHECK(a.inter_node.bandwidth_bytes_per_s == 25e9);
  CHECK(cluster_preset("dgx-a100-80gb").gpu.memory_bytes == 84986665370.0);  // 79.15 GiB
  CHECK(a.gpu.fp8_peak_flops == 0);  // no fp8 tensor cores
  const Cluster h = cluster_preset("dgx-h100");
  CHECK(h.gpu.peak_flops == 989e12);
  CHECK(h.gpu.fp8_peak_flops == 1979e12);
  // H800: H100 compute, NVLink 400 GB/s in all (200 per direction).
  const Cluster h800 = cluster_preset("dgx-h800");
  CHECK(h800.gpu.fp8_peak_flops == 1979e12);
  CHECK(h800.intra_node.bandwidth_bytes_per_s == 200e9);
  CHECK(h800.gpu.memory_bytes == h.gpu.memory_bytes);
  // DGX B200: 2.25 / 4.5 PFLOP/s dense, 180 GiB (178.35 to CUDA) at 8 TB/s, NVLink 5 at 900 GB/s per direction.
  const Cluster b = cluster_preset("dgx-b200");
  CHECK(b.gpu.peak_flops == 2250e12);
  CHECK(b.gpu.fp8_peak_flops == 4500e12);
  CHECK(b.gpu.memory_bytes == 191501854310.0);
  CHECK(b.gpu.hbm_bytes_per_s == 8e12);
  CHECK(b.intra_node.bandwidth_bytes_per_s == 900e9);
  // GB200 NVL72: one NVLink domain of 72 GPUs.
  const Cluster nvl = cluster_preset("gb200-nvl72");
  CHECK(nvl.gpus_per_node == 72);
  CHECK(nvl.gpu.peak_flops == 2500e12);
  CHECK(nvl.gpu.fp8_peak_flops == 5000e12);
  CHECK(nvl.gpu.memory_bytes == 197901355581.0);  // 184.31 GiB
  CHECK(h.gpu.memory_bytes == 84943715697.0);  // 79.11 GiB
  CHECK(h.gpu.hbm_bytes_per_s == 3.35e12);
  CHECK(h.intra_node.bandwidth_bytes_per_s == 450e9);
  CHECK(h.inter_node.bandwidth_bytes_per_s == 50e9);
  CHECK(h.intra_node.latency_s < h.inter_node.latency_s);
  const Cluster h200 = cluster_preset("hgx-h200");
  CHECK(h200.gpu.memory_bytes == 150109106995.0);  // 139.80 GiB
  CHECK(h200.gpu.hbm_bytes_per_s == 4.8e12);
  CHECK(h200.memory_capacity() == 150109106995.0);
  CHECK_FALSE(h200.ideal);
}

TEST_CASE("a plan may use each GPU's memory less the headroom, which cluster files carry") {
  Cluster h = cluster_preset("dgx-h100");
  CHECK(h.memory_headroom == kDefaultMemoryHeadroom);
  const double h100 = 84943715697.0;
  CHECK(h.memory_limit() == h100 * (1 - 0.02));
  CHECK(h.memory_limit_at(9) == h100 * (1 - 0.02));
  CHECK(h.memory_limit_text(h.memory_limit()) == "83.2 GB (84.9 GB less the 2% headroom)");
  // The default is not written, so files written before the headroom read and write the same.
  CHECK(nlohmann::json::parse(cluster_to_json_text(h)).contains("memory_headroom") == false);
  h.memory_headroom = 0.05;
  CHECK(h.memory_limit() == h100 * 0.95);
  const std::string text = cluster_to_json_text(h);
  CHECK(nlohmann::json::parse(text)["memory_headroom"] == 0.05);
  const Cluster back = cluster_from_json_text(text, "h.json");
  CHECK(back.memory_headroom == 0.05);
  CHECK(cluster_to_json_text(back) == text);
  h.memory_headroom = 0;
  CHECK(h.memory_limit() == h100);
  CHECK(h.memory_limit_text(80e9) == "80.0 GB");
  CHECK(std::isinf(cluster_preset("ideal").memory_limit()));
  CHECK(cluster_preset("ideal").memory_limit_text(cluster_preset("ideal").memory_limit()) == "no limit");

  nlohmann::json j = nlohmann::json::parse(text);
  j["memory_headroom"] = 0.6;
  CHECK(bad_input([&] { cluster_from_json_text(j.dump(), "h.json"); }) ==
        "h.json: memory_headroom is 0.6; give the share of each GPU's memory to keep free, from 0 to 0.5");
  j["memory_headroom"] = -0.01;
  CHECK(bad_input([&] { cluster_from_json_text(j.dump(), "h.json"); }) ==
        "h.json: memory_headroom is -0.01; give the share of each GPU's memory to keep free, from 0 to 0.5");
}

TEST_CASE("the ideal cluster is free, instant and unbounded") {
  const Cluster c = cluster_preset("ideal");
  CHECK(c.ideal);
  CHECK(std::isinf(c.memory_limit()));
  CHECK(std::isinf(c.link(0, 1).bandwidth_bytes_per_s));
  CHECK(c.link(0, 100000).latency_s == 0);
  CHECK(std::isinf(c.link(0, 100000).bandwidth_bytes_per_s));
  CHECK(c.gpu.peak_flops == 989e12);
  c.check_capacity(1 << 16);
}

TEST_CASE("presets serialise to the cluster JSON and round-trip") {
  for (const std::string& name : cluster_preset_names()) {
    INFO(name);
    const Cluster c = cluster_preset(name);
    const std::string text = cluster_to_json_text(c);
    const Cluster back = cluster_from_json_text(text, name + ".json");
    CHECK(cluster_to_json_text(back) == text);
    CHECK(back.name == c.name);
    CHECK(back.nodes == c.nodes);
    CHECK(back.gpus_per_node == c.gpus_per_node);
    CHECK(back.gpu.name == c.gpu.name);
    CHECK(back.gpu.peak_flops == c.gpu.peak_flops);
    CHECK(back.gpu.memory_bytes == c.gpu.memory_bytes);
    CHECK(back.gpu.hbm_bytes_per_s == c.gpu.hbm_bytes_per_s);
    CHECK(back.intra_node.bandwidth_bytes_per_s == c.intra_node.bandwidth_bytes_per_s);
    CHECK(back.intra_node.latency_s == c.intra_node.latency_s);
    CHECK(back.inter_node.bandwidth_bytes_per_s == c.inter_node.bandwidth_bytes_per_s);
    CHECK(back.inter_node.latency_s == c.inter_node.latency_s);
    CHECK(back.ideal == c.ideal);
  }
  // The exact form for one preset.
  CHECK(cluster_to_json_text(cluster_preset("dgx-h100")) ==
        R"({
  "name": "dgx-h100",
  "nodes": 0,
  "gpus_per_node": 8,
  "gpu": {
    "name": "H100 SXM 80GB",
    "peak_tflops": 989.0,
    "fp8_peak_tflops": 1979.0,
    "memory_bytes": 84943715697.0,
    "hbm_bytes_per_s": 3350000000000.0
  },
  "intra_node": {
    "bandwidth_bytes_per_s": 450000000000.0,
    "latency_s": 2.5e-06
  },
  "inter_node": {
    "bandwidth_bytes_per_s": 50000000000.0,
    "latency_s": 6e-06
  }
}
)");
}

TEST_CASE("links: measured where covered, else intra- or inter-node") {
  const Cluster c = load_cluster(std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/cluster-2x-h100.json");
  CHECK(c.nodes == 2);
  CHECK(c.gpus_per_node == 8);
  CHECK(c.node_of(7) == 0);
  CHECK(c.node_of(8) == 1);
  CHECK(c.link(0, 7).bandwidth_bytes_per_s == 450e9);
  CHECK(c.link(7, 8).bandwidth_bytes_per_s == 50e9);
  CHECK(c.link(7, 8).latency_s == 6e-6);
  CHECK_FALSE(c.link(0, 7).inter_node);
  CHECK(c.link(7, 8).inter_node);
  CHECK_FALSE(c.measured);

  const Cluster m = cluster_from_json_text(
      cluster_text("450e9", R"(, "measured_links": {"gpus": 2, "bandwidth_bytes_per_s": [[0, 100e9], [120e9, 0]],
                                                    "latency_s": [[0, 3e-6], [4e-6, 0]]})"),
      "m.json");
  REQUIRE(m.measured);
  CHECK(m.link(0, 1).bandwidth_bytes_per_s == 100e9);
  CHECK(m.link(1, 0).bandwidth_bytes_per_s == 120e9);
  CHECK(m.link(1, 0).latency_s == 4e-6);
  CHECK(m.link(0, 2).bandwidth_bytes_per_s == 450e9);  // not covered: same node
  CHECK(m.link(1, 4).bandwidth_bytes_per_s == 25e9);   // not covered: another node
  CHECK_FALSE(m.link(0, 1).inter_node);
  CHECK(m.link(1, 4).inter_node);
  const std::string text = cluster_to_json_text(m);
  CHECK(cluster_to_json_text(cluster_from_json_text(text, "again.json")) == text);
}

TEST_CASE("capacity of a fixed-size cluster") {
  const Cluster c = load_cluster(std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/cluster-2x-h100.json");
  c.check_capacity(16);
  CHECK(bad_input([&] { c.check_capacity(32); }) ==
        "tp x cp x pp x dp = 32 GPUs but cluster '2x-dgx-h100' has 16 (2 x 8); use fewer GPUs or a cluster file with more "
        "nodes");
  cluster_preset("dgx-h100").check_capacity(4096);  // presets grow as needed
}

TEST_CASE("cluster input errors name the field") {
  CHECK(bad_input([] { cluster_preset("dgx-b300"); }) ==
        "unknown cluster 'dgx-b300'; known clusters: dgx-a100-40gb, dgx-a100-80gb, dgx-b200, dgx-h100, dgx-h800, gb200-nvl72, hgx-h200, ideal (or give a "
        "path to a cluster JSON file)");
  CHECK(bad_input([] { load_cluster("/nonexistent/c.json"); }) == "cluster file '/nonexistent/c.json' not found");
  CHECK(bad_input([] { cluster_from_json_text(cluster_text("0"), "c.json"); }) ==
        "c.json: intra_node.bandwidth_bytes_per_s must be positive, got 0");
  CHECK(bad_input([] { cluster_from_json_text(cluster_text("\"fast\""), "c.json"); }) ==
        "c.json: intra_node.bandwidth_bytes_per_s must be a number (or \"inf\"), got \"fast\"");
  CHECK(bad_input([] { cluster_from_json_text(cluster_text("1e9", R"(, "nodes_count": 3)"), "c.json"); })
            .starts_with("c.json: unknown field 'nodes_count'; known fields: name, nodes,"));
  CHECK(bad_input([] {
          cluster_from_json_text(
              cluster_text("1e9", R"(, "measured_links": {"gpus": 2, "bandwidth_bytes_per_s": [[0, -1], [1, 0]],
                                                         "latency_s": [[0, 0], [0, 0]]})"),
              "c.json");
        }) == "c.json: measured_links.bandwidth_bytes_per_s[0][1] must be positive, got -1");
  CHECK(bad_input([] {
          cluster_from_json_text(
              cluster_text("1e9", R"(, "measured_links": {"gpus": 2, "bandwidth_bytes_per_s": [[0, 1]],
                                                         "latency_s": [[0, 0], [0, 0]]})"),
              "c.json");
        }) == "c.json: measured_links.bandwidth_bytes_per_s must be a 2 x 2 array of numbers");
  CHECK(bad_input([] { cluster_from_json_text(R"({"name": "c", "nodes": 1})", "c.json"); }) ==
        "c.json: missing required field 'gpus_per_node'");
  CHECK(bad_input([] { cluster_from_json_text("{\"name\": ", "c.json"); })
            .starts_with("c.json: malformed JSON at byte 10: "));
}
