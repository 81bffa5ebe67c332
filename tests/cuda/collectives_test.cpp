// nccl-tests' bandwidth arithmetic, the groups a plan's collectives use, and the measured matrix.
#include <catch2/catch.hpp>

#include "../error_text.hpp"
#include "core/cluster.hpp"
#include "profiler/cuda/host/collectives.hpp"
#include "profiler/cuda/host/cuda_profiler_api.hpp"

using namespace pw;

TEST_CASE("bus factors are nccl-tests' for each collective", "[cuda][host]") {
  // all-reduce 2 (n - 1) / n; all-gather, reduce-scatter, all-to-all (n - 1) / n; the rest 1.
  CHECK(bus_factor(CollectiveOp::AllReduce, 8) == Approx(1.75));
  CHECK(bus_factor(CollectiveOp::AllReduce, 2) == Approx(1.0));
  CHECK(bus_factor(CollectiveOp::AllReduce, 1) == 0.0);
  CHECK(bus_factor(CollectiveOp::AllGather, 4) == Approx(0.75));
  CHECK(bus_factor(CollectiveOp::ReduceScatter, 8) == Approx(0.875));
  CHECK(bus_factor(CollectiveOp::AllToAll, 2) == Approx(0.5));
  CHECK(bus_factor(CollectiveOp::SendRecv, 2) == 1.0);
  CHECK(bus_factor(CollectiveOp::Broadcast, 8) == 1.0);
  CHECK(bus_factor(CollectiveOp::Reduce, 8) == 1.0);
  CHECK(bad_input([] { bus_factor(CollectiveOp::AllReduce, 0); }) == "collective: a group needs at least 1 rank, got 0");
  CHECK(std::string(to_string(CollectiveOp::ReduceScatter)) == "reduce_scatter");
  CHECK(std::string(to_string(CollectiveOp::AllToAll)) == "alltoall");
}

TEST_CASE("algbw is bytes over time in decimal GB/s and busbw scales it", "[cuda][host]") {
  // 1 GiB all-reduce on 8 GPUs in 10 ms: algbw = 1073741824 / 1e9 / 0.01 = 107.3741824 GB/s, busbw x 1.75.
  const BandwidthSample s = bandwidth_sample(CollectiveOp::AllReduce, 8, 1073741824.0, 0.01);
  CHECK(s.algbw_gb_s == Approx(107.3741824));
  CHECK(s.busbw_gb_s == Approx(187.9048192));
  // A send/receive's busbw is its algbw.
  const BandwidthSample p = bandwidth_sample(CollectiveOp::SendRecv, 2, 1e6, 1e-5);
  CHECK(p.algbw_gb_s == Approx(100.0));
  CHECK(p.busbw_gb_s == Approx(100.0));
}

TEST_CASE("counts: the whole buffer, or a rank's share for all-gather and reduce-scatter", "[cuda][host]") {
  CHECK(nccl_count(CollectiveOp::AllReduce, 4096, 4, 2) == 2048);
  CHECK(nccl_count(CollectiveOp::AllGather, 4096, 4, 2) == 512);
  CHECK(nccl_count(CollectiveOp::ReduceScatter, 4096, 4, 4) == 256);
  // Sizes become whole elements on every rank: 1000 bytes of bf16 on 3 ranks -> 996 (166 per rank).
  CHECK(round_to_ranks(CollectiveOp::AllGather, 1000, 3, 2) == 996);
  CHECK(round_to_ranks(CollectiveOp::AllReduce, 1001, 3, 2) == 1000);
  CHECK(round_to_ranks(CollectiveOp::AllGather, 1, 8, 2) == 16);  // at least one element per rank
}

TEST_CASE("message sizes from 1 KiB to 1 GiB by factors of 4, as -b 1K -e 1G -f 4", "[cuda][host]") {
  const std::vector<double> s = geometric_sizes(1024, 1024.0 * 1024 * 1024, 4);
  REQUIRE(s.size() == 11);
  CHECK(s.front() == 1024);
  CHECK(s[1] == 4096);
  CHECK(s.back() == 1073741824.0);
  CHECK(geometric_sizes(8, 8, 2) == std::vector<double>{8});
  CHECK(bad_input([] { geometric_sizes(0, 8, 2); }) == "--min-bytes: must be at least 1, got 0");
  CHECK(bad_input([] { geometric_sizes(16, 8, 2); }) == "--max-bytes: must be at least --min-bytes (16), got 8");
  CHECK(bad_input([] { geometric_sizes(1, 8, 1); }) == "size factor: must be above 1, got 1");
}

TEST_CASE("tp groups are consecutive ranks, dp groups stride by tp, pp outermost", "[cuda][host]") {
  // tp 2, dp 2, pp 2: rank = (p * dp + d) * tp + t.
  CHECK(tp_groups(2, 2, 2) == std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(dp_groups(2, 2, 2) == std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(tp_groups(4, 1, 1) == std::vector<std::vector<int>>{{0, 1, 2, 3}});
  CHECK(dp_groups(1, 4, 1) == std::vector<std::vector<int>>{{0, 1, 2, 3}});
  CHECK(bad_input([] { tp_groups(0, 1, 1); }) == "--tp: must be at least 1, got 0");
}

TEST_CASE("the measured matrix takes each pair from either direction", "[cuda][host]") {
  std::vector<LinkProfile> links(3);
  links[0].src = 0, links[0].dst = 1, links[0].bandwidth_bytes_per_s = 100e9, links[0].latency_s = 5e-6;
  links[1].src = 2, links[1].dst = 0, links[1].bandwidth_bytes_per_s = 50e9, links[1].latency_s = 8e-6;
  links[2].src = 1, links[2].dst = 2, links[2].bandwidth_bytes_per_s = 80e9, links[2].latency_s = 6e-6;
  const LinkMatrix m = link_matrix(links, 3);
  CHECK(m.at(0, 1).bandwidth_bytes_per_s == 100e9);
  CHECK(m.at(1, 0).bandwidth_bytes_per_s == 100e9);
  CHECK(m.at(0, 2).latency_s == 8e-6);
  CHECK(m.at(2, 1).bandwidth_bytes_per_s == 80e9);
  CHECK(m.at(1, 1).bandwidth_bytes_per_s == 0);
  CHECK(bad_input([&] { link_matrix(links, 4); }) ==
        "link matrix: no measured link between GPU 0 and GPU 3; measure every pair");

  // A ring over GPUs 0, 1, 2 is bound by the slowest bandwidth (2 <-> 0: 50 GB/s) and the highest latency
  // (8 us); over 1 and 2 by their own link.
  const LinkSpec ring = group_link({0, 1, 2}, links);
  CHECK(ring.bandwidth_bytes_per_s == 50e9);
  CHECK(ring.latency_s == 8e-6);
  CHECK(group_link({1, 2}, links).bandwidth_bytes_per_s == 80e9);
  CHECK(bad_input([&] { group_link({0, 3}, links); }) ==
        "collective group: no measured link between GPU 0 and GPU 3; measure every pair");
  // As the profile keeps a measurement: kind, ranks, size, time and that link.
  const CollectiveProfile kept = collective_profile(bandwidth_sample(CollectiveOp::ReduceScatter, 3, 3e6, 1e-4), ring);
  CHECK(kept.kind == CollectiveKind::ReduceScatter);
  CHECK(kept.ranks == 3);
  CHECK(kept.bytes == 3e6);
  CHECK(kept.time_s == 1e-4);
  CHECK(kept.link.bandwidth_bytes_per_s == 50e9);
  CHECK(bad_input([&] { collective_profile(bandwidth_sample(CollectiveOp::Broadcast, 3, 3e6, 1e-4), ring); }) ==
        "collective broadcast: the profile keeps all_reduce, all_gather and reduce_scatter only");

  // As a cluster file: the matrix round-trips, intra- and inter-node links are the medians.
  GpuSpec gpu{"NVIDIA H200", 900e12, 140e9, 4.8e12};
  const Cluster c = measured_cluster("measured-h200", gpu, 3, links);
  CHECK(c.intra_node.bandwidth_bytes_per_s == 80e9);
  CHECK(c.intra_node.latency_s == 6e-6);
  CHECK(c.inter_node.bandwidth_bytes_per_s == 80e9);
  const Cluster back = cluster_from_json_text(cluster_to_json_text(c), "measured.json");
  REQUIRE(back.measured);
  CHECK(back.link(0, 2).bandwidth_bytes_per_s == 50e9);
  CHECK(back.link(1, 2).latency_s == 6e-6);
  CHECK(bad_input([&] { measured_cluster("x", gpu, 1, {}); }) ==
        "measured cluster: no link measured; profile with --links on 2 GPUs or more");
}

TEST_CASE("the GEMM slowdown beside NCCL traffic is the ratio of the two times less one", "[cuda][host]") {
  CHECK(overlap_slowdown(2e-3, 2.5e-3) == Approx(0.25));
  CHECK(overlap_slowdown(0, 1) == 0);
}

TEST_CASE("nccl-tests' table", "[cuda][host]") {
  const std::vector<BandwidthSample> s{bandwidth_sample(CollectiveOp::AllReduce, 4, 1024, 20e-6),
                                       bandwidth_sample(CollectiveOp::AllReduce, 4, 1048576, 100e-6)};
  CHECK(nccl_tests_table(s, "bf16", 2, "tp group 0 (GPUs 0-3)") ==
        "# all_reduce over tp group 0 (GPUs 0-3) (4 ranks; time: median, algbw = size / time, busbw = algbw x 1.5)\n"
        "#   size (B)        count   type  redop  time (us)    algbw    busbw\n"
        "        1024          512   bf16    sum      20.00     0.05     0.08\n"
        "     1048576       524288   bf16    sum     100.00    10.49    15.73\n");
}
