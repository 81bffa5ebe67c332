// Transfers between pipeline ranks: duration latency + bytes / bandwidth, the cost model's view of the
// link, bandwidth shared by transfers on the same link at once, and which bytes each rank sends.
#include <catch2/catch.hpp>

#include <string>

#include "core/cost_model.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim_test_util.hpp"

using namespace pw;
using namespace pw::test;

namespace {

// Only the p2p link matters to the simulator: this one halves the bandwidth and doubles the latency.
class HalfLinkCost : public CostModel {
 public:
  std::string name() const override { return "half-link"; }
  double phase_time(const Layer&, const LayerWork&, Phase, const GpuSpec&, const LinkSpec&, int) const override {
    return 0;
  }
  double cp_ring_time(const LayerWork&, Phase, const GpuSpec&, const LinkSpec&) const override { return 0; }
  double expert_comm_time(const LayerWork&, Phase, const AllToAllLinks&) const override { return 0; }
  double serving_time(const Layer&, const ServingWork&, const GpuSpec&, const LinkSpec&, int) const override { return 0; }
  double collective_time(CollectiveKind, double, int, const LinkSpec&) const override { return 0; }
  LinkSpec p2p_link(const LinkSpec& nominal) const override {
    return LinkSpec{nominal.bandwidth_bytes_per_s / 2, nominal.latency_s * 2};
  }
  double optimizer_step_time(double, const GpuSpec&, const StateWidths&) const override { return 0; }
  double model_state_bytes_per_parameter(int, int, const StateWidths&) const override { return 0; }
};

const SimEvent& find_event(const std::vector<SimEvent>& events, int rank, Lane lane, const std::string& text) {
  for (const SimEvent& e : events)
    if (e.rank == rank && e.lane == lane && to_text(e.action) == text) return e;
  FAIL("no event " << text << " on rank " << rank);
  throw;
}

}  // namespace

TEST_CASE("a transfer takes latency + bytes / bandwidth", "[sim][comm]") {
  // Two stages, one micro-batch: F0, forward transfer, F1, BW1, backward transfer, BW0, all in series:
  // time = F + c + F + (B + W) + c + (B + W) with c = 5 us + 1 MB / 25 GB/s = 5 us + 40 us = 45 us.
  const double f = 1e-3, b = 2e-3, w = 1e-3, bytes = 1e6, bw = 25e9, lat = 5e-6;
  const double c = lat + bytes / bw;
  Recorder rec;
  const SimResult r = simulate(
      sim_input(generated("gpipe", 2, 1), uniform_costs(2, f, b, w, 0, 0, bytes), one_node_cluster(bw, lat)), &rec);
  CHECK(r.step_time_s == Approx(f + c + f + (b + w) + c + (b + w)).epsilon(1e-12));
  CHECK(r.pipeline_time_s == r.step_time_s);
  CHECK(r.ranks[0].p2p_bytes_sent == bytes);
  CHECK(r.ranks[1].p2p_bytes_sent == bytes);
  CHECK(r.actions == 8);  // 2 compute + 2 comm per rank

  const SimEvent& send = find_event(rec.events(), 0, Lane::Send, "0SEND_F0");
  const SimEvent& recv = find_event(rec.events(), 1, Lane::Recv, "1RECV_F0");
  CHECK(send.start_s == f);
  CHECK(send.end_s == Approx(f + c).epsilon(1e-12));
  CHECK(send.bytes == bytes);
  // Rank 1 waited at its receive from the start; the recv lane shows the part after the transfer began.
  CHECK(recv.start_s == f);
  CHECK(recv.end_s == send.end_s);
  CHECK(recv.flow_id == send.flow_id);
  CHECK(send.flow_id >= 0);
  const SimEvent& f1 = find_event(rec.events(), 1, Lane::Compute, "1F0");
  CHECK(f1.start_s == send.end_s);
}

TEST_CASE("the cost model's p2p link replaces the nominal one", "[sim][comm]") {
  // HalfLinkCost: bandwidth 25/2 GB/s, latency 10 us: c = 10 us + 80 us = 90 us per transfer.
  const double f = 1e-3, bytes = 1e6;
  SimInput in =
      sim_input(generated("gpipe", 2, 1), uniform_costs(2, f, f, 0, 0, 0, bytes), one_node_cluster(25e9, 5e-6));
  HalfLinkCost cost;
  in.cost = &cost;
  const double c = 10e-6 + bytes / 12.5e9;
  CHECK(simulate(in).step_time_s == Approx(4 * f + 2 * c).epsilon(1e-12));
}

TEST_CASE("the ideal cluster moves tensors in no time but still counts the bytes", "[sim][comm]") {
  // Three stages with output sizes 100, 200, 300 B. The boundary tensor between s and s + 1 is stage s's
  // output, in both directions: rank 0 sends m x 100 (forward), rank 1 m x (200 forward + 100 backward),
  // rank 2 m x 200 (backward); stage 2's output goes nowhere.
  const int m = 4;
  auto costs = uniform_costs(3, 1, 1, 1);
  for (int s = 0; s < 3; ++s) costs[s].output_bytes = 100.0 * (s + 1);
  const SimResult r = simulate(sim_input(generated("1f1b", 3, m), costs, ideal_cluster()));
  CHECK(r.step_time_s == (m + 2) * 3.0);
  CHECK(r.ranks[0].p2p_bytes_sent == m * 100.0);
  CHECK(r.ranks[1].p2p_bytes_sent == m * 300.0);
  CHECK(r.ranks[2].p2p_bytes_sent == m * 200.0);
}

TEST_CASE("two transfers on one link at once share its bandwidth", "[sim][comm]") {
  // Four ranks on GPUs {0, 1, 0, 1}: ranks 0 -> 1 and 2 -> 3 both cross GPU 0 -> GPU 1. GPipe, m = 2,
  // stage 0 forward 4 s, the others 1 s, every transfer 1 B over a 1 B/s link (1 s alone).
  // Rank 0: F(0,0) [0,4], F(0,1) [4,8], then sends micro-batch 1 at 8 s.
  // Micro-batch 0: transfer [4,5], F(1,0) [5,6], transfer (GPU 1 -> 0) [6,7], F(2,0) [7,8], send at 8 s.
  // Both sends cross GPU 0 -> 1 from 8 s at 1/2 B/s each: both arrive at 10 s (9 s each when the ranks sit on
  // four different GPUs).
  auto costs = uniform_costs(4, 1, 1, 1, 0, 0, 1);
  costs[0].forward_s = 4;
  SimInput in = sim_input(generated("gpipe", 4, 2), costs, one_node_cluster(1, 0));
  in.rank_gpu = {0, 1, 0, 1};
  Recorder shared;
  simulate(in, &shared);
  const SimEvent& a = find_event(shared.events(), 0, Lane::Send, "0SEND_F1");
  const SimEvent& b = find_event(shared.events(), 2, Lane::Send, "2SEND_F0");
  CHECK(a.start_s == 8);
  CHECK(b.start_s == 8);
  CHECK(a.end_s == 10);
  CHECK(b.end_s == 10);

  in.rank_gpu.clear();
  Recorder apart;
  simulate(in, &apart);
  CHECK(find_event(apart.events(), 0, Lane::Send, "0SEND_F1").end_s == 9);
  CHECK(find_event(apart.events(), 2, Lane::Send, "2SEND_F0").end_s == 9);
}

TEST_CASE("a rank's sends leave one at a time", "[sim][comm]") {
  // One stage per rank, stage 0 with zero-time forwards: rank 0 hands over m = 3 sends at t = 0, its send
  // lane runs them back to back over a 1 B/s link: arrivals at 2, 4, 6 s for 2 B each.
  auto costs = uniform_costs(2, 0, 0, 0, 0, 0, 2);
  costs[1].forward_s = 0.5;
  Recorder rec;
  simulate(sim_input(generated("gpipe", 2, 3), costs, one_node_cluster(1, 0)), &rec);
  for (int i = 0; i < 3; ++i) {
    const SimEvent& e = find_event(rec.events(), 0, Lane::Send, "0SEND_F" + std::to_string(i));
    CHECK(e.start_s == 2.0 * i);
    CHECK(e.end_s == 2.0 * (i + 1));
  }
}

namespace {

// Links as given; compute runs 1 + `slowdown` times as long while a transfer touches its rank, and each send or
// receive holds its rank `post` seconds before it goes on.
class TransferCost : public HalfLinkCost {
 public:
  explicit TransferCost(double slowdown, double post = 0) : slowdown_(slowdown), post_(post) {}
  LinkSpec p2p_link(const LinkSpec& nominal) const override { return nominal; }
  double transfer_compute_slowdown() const override { return slowdown_; }
  double transfer_post_s() const override { return post_; }

 private:
  double slowdown_, post_;
};

}  // namespace

TEST_CASE("compute slows down while a transfer to or from its rank is in flight", "[sim][comm]") {
  // GPipe, 2 stages, 2 micro-batches; F 1 ms on stage 0 and 2 ms on stage 1; each forward transfer
  // 0.3 ms (600 kB at 2 GB/s, no latency); slowdown 1 (compute at half speed while a transfer is in flight).
  //  - rank 0: F0 [0, 1]; its send [1, 1.3] overlaps F1 from 1: 0.15 ms of work done by 1.3, the other
  //    0.85 ms at full speed: F1 ends at 2.15 (not 2), and its send runs [2.15, 2.45].
  //  - rank 1: F0 from 1.3 at full speed until 2.15 (0.85 ms done), at half speed until 2.45 (0.15 more),
  //    then the last 1 ms: it ends at 3.45 (not 3.3); F1 then runs alone: [3.45, 5.45].
  const double bytes = 600e3, bw = 2e9;
  std::vector<StageCost> costs = uniform_costs(2, 1e-3, 1e-3, 1e-3, 0, 0, bytes);
  costs[1].forward_s = 2e-3;
  SimInput in = sim_input(generated("gpipe", 2, 2), costs, one_node_cluster(bw, 0));
  TransferCost slow(1.0);
  in.cost = &slow;
  Recorder rec;
  const SimResult r = simulate(in, &rec);
  const SimEvent& r0f1 = find_event(rec.events(), 0, Lane::Compute, "0F1");
  CHECK(r0f1.start_s == Approx(1e-3).epsilon(1e-12));
  CHECK(r0f1.end_s == Approx(2.15e-3).epsilon(1e-12));
  CHECK(find_event(rec.events(), 0, Lane::Send, "0SEND_F1").start_s == Approx(2.15e-3).epsilon(1e-12));
  const SimEvent& r1f0 = find_event(rec.events(), 1, Lane::Compute, "1F0");
  CHECK(r1f0.start_s == Approx(1.3e-3).epsilon(1e-12));
  CHECK(r1f0.end_s == Approx(3.45e-3).epsilon(1e-12));
  const SimEvent& r1f1 = find_event(rec.events(), 1, Lane::Compute, "1F1");
  CHECK(r1f1.start_s == Approx(3.45e-3).epsilon(1e-12));
  CHECK(r1f1.end_s == Approx(5.45e-3).epsilon(1e-12));
  // Busy time is the compute lane's wall time: the slowed actions count at their stretched length.
  double busy0 = 0;
  for (const SimEvent& e : rec.events())
    if (e.rank == 0 && e.lane == Lane::Compute) busy0 += e.end_s - e.start_s;
  CHECK(r.ranks[0].busy_s == Approx(busy0).epsilon(1e-12));
  CHECK(r.ranks[0].busy_s > 2e-3 + 2 * 2e-3);  // more than the 6 ms of F and BW at full speed

  // Slowdown 0 is the plain simulation, to the bit.
  TransferCost none(0.0);
  in.cost = &none;
  const SimInput base = sim_input(generated("gpipe", 2, 2), costs, one_node_cluster(bw, 0));
  Recorder with_none, without;
  CHECK(simulate(in, &with_none).step_time_s == simulate(base, &without).step_time_s);
  CHECK(with_none.events() == without.events());
  CHECK(find_event(without.events(), 0, Lane::Compute, "0F1").end_s == Approx(2e-3).epsilon(1e-12));
}

TEST_CASE("posting a send or a receive holds the rank's thread before the transfer starts", "[sim][comm]") {
  // GPipe, 2 stages, 1 micro-batch, F 1 ms, B 1 ms, W 1 ms a stage, free links; posting 0.25 ms.
  //  - rank 1 posts its receive of the activation at 0 (beside rank 0's F0), then waits for it;
  //  - rank 0: F0 [0, 1], posts the send [1, 1.25]: the activation arrives at 1.25;
  //  - rank 1: F0 [1.25, 2.25], its backward, then posts the gradient's send: 0.25 ms after its backward;
  //  - rank 0 posted its receive of the gradient while waiting for it: its backward starts as it arrives.
  // The two sends' posts are on the critical path: the step is 0.5 ms longer, to the rounding.
  std::vector<StageCost> costs = uniform_costs(2, 1e-3, 1e-3, 1e-3, 0, 0, 1e3);
  SimInput in = sim_input(generated("gpipe", 2, 1), costs, one_node_cluster(1e18, 0));
  TransferCost none(0.0), posting(0.0, 2.5e-4);
  in.cost = &none;
  Recorder before, after;
  const SimResult a = simulate(in, &before);
  in.cost = &posting;
  const SimResult b = simulate(in, &after);
  CHECK(b.step_time_s - a.step_time_s == Approx(5e-4).epsilon(1e-9));
  CHECK(find_event(after.events(), 0, Lane::Send, "0SEND_F0").start_s == Approx(1.25e-3).epsilon(1e-9));
  CHECK(find_event(after.events(), 1, Lane::Compute, "1F0").start_s == Approx(1.25e-3).epsilon(1e-9));
  // The compute itself is as long as before: posting is not compute.
  CHECK(b.ranks[0].busy_s == Approx(a.ranks[0].busy_s).epsilon(1e-12));
  // Posting 0 is the plain simulation, to the bit.
  const SimInput base = sim_input(generated("gpipe", 2, 1), costs, one_node_cluster(1e18, 0));
  Recorder without;
  CHECK(simulate(base, &without).step_time_s == a.step_time_s);
  CHECK(without.events() == before.events());
}
