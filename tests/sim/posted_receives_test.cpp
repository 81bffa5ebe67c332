// Receives as PyTorch's pipelining runtime runs them (torch/distributed/pipelining/runtime.py at 1f1416a3):
// posted where they stand in the list, waited for by the action that consumes the tensor. PyTorch's own
// ZB1P artifact, lowered by PyTorch with its receives posted early, times as its compute-only order does.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include "schedules/pytorch_csv.hpp"
#include "sim_test_util.hpp"

using namespace pw;
using namespace pw::test;

namespace {

Schedule artifact(const std::string& name) {
  std::ifstream in(std::string(PIPEWRIGHT_SOURCE_DIR) + "/tests/schedules/pytorch_artifacts/" + name);
  REQUIRE(in);
  return schedule_from_pytorch_csv(std::string(std::istreambuf_iterator<char>(in), {}), name);
}

double step_time(const Schedule& s, const Cluster& cluster) {
  // F 1 ms, B 1 ms, W 0.5 ms per stage; each boundary tensor 1 MB.
  return simulate(sim_input(s, uniform_costs(s.num_stages(), 1e-3, 1e-3, 0.5e-3, 0, 0, 1e6), cluster)).step_time_s;
}

}  // namespace

TEST_CASE("PyTorch's ZB1P artifact: its lowered file (receives posted early) times as its compute-only order") {
  const Schedule compute = artifact("zb1p_2rank_2stagep_compute.csv");
  const Schedule comms = artifact("zb1p_2rank_2stagep_comms.csv");
  // PyTorch's lowering merged each I with the W right after it (a full backward), which changes nothing
  // when the two are timed as B + W.
  for (const Cluster& cluster : {ideal_cluster(), one_node_cluster(10e9, 5e-6)}) {
    INFO(cluster.name);
    const double a = step_time(compute, cluster), b = step_time(comms, cluster);
    CHECK(b == Approx(a).epsilon(1e-12));
  }
  // On free links the two stages of a rank never wait for data longer than the compute in between:
  // 2 ranks x (4 stages' F + B + W of 8 micro-batches) / 2 ranks, plus the fill and drain of zero-bubble.
  CHECK(step_time(comms, ideal_cluster()) > 8 * 2 * 2.5e-3);
}

TEST_CASE("a receive posted far ahead of its consumer does not hold the rank there") {
  // Rank 1 posts the receive of micro-batch 1's input first, then computes micro-batch 0: a blocking
  // receive would hold it until rank 0's second forward (2 ms) and end the step at 7 ms.
  const Schedule s = hand_schedule(
      2, {0, 1},
      {{"0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0BW0", "0RECV_B1", "0BW1"},
       {"1RECV_F1", "1RECV_F0", "1F0", "1BW0", "1SEND_B0", "1F1", "1BW1", "1SEND_B1"}},
      true);
  const SimResult r = simulate(sim_input(s, uniform_costs(2, 1e-3, 1e-3, 0), ideal_cluster()));
  // F and BW 1 ms each: 0F0 | 1F0 (with 0F1) | 1BW0 | 1F1 (with 0BW0) | 1BW1 | 0BW1.
  CHECK(r.step_time_s == Approx(6e-3));
}
