// The pipeline model's bookkeeping: memory deltas, data-parallel reduction on the collective lane, the
// optimizer step, what observers see, determinism, and the errors on inconsistent input.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "core/error.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim_test_util.hpp"

using namespace pw;
using namespace pw::test;

namespace {

std::string error_of(const SimInput& in) {
  try {
    simulate(in);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    return e.what();
  }
  return "(no error)";
}

// 1F1B, p = 4, m = 8, F = 1, B = 1.5, W = 0.5: the flush ends at T = (m + p - 1)(F + B + W) = 33 s;
// the last micro-batch's backward walks from rank 3 down to rank 0, so rank i's last BW (2 s) ends at
// T - 2 i.
SimInput one_f_one_b() { return sim_input(generated("1f1b", 4, 8), uniform_costs(4, 1, 1.5, 0.5), ideal_cluster()); }

}  // namespace

TEST_CASE("F allocates activations, B frees all but the weight-gradient part, W frees that", "[sim][memory]") {
  // One rank, one stage, m = 2, each action 1 s: F0 F1 B0 W0 B1 W1 with activation 100 B of which 30 B
  // are held until W: in use 100, 200 (at F starts), then 130, 100, 30, 0 (at B/W ends).
  SimInput in = sim_input(hand_schedule(2, {0}, {{"0F0", "0F1", "0B0", "0W0", "0B1", "0W1"}}, false),
                          uniform_costs(1, 1, 1, 1, 100, 30), ideal_cluster());
  in.stages[0].model_state_bytes = 5000;
  Recorder rec;
  const SimResult r = simulate(in, &rec);
  using S = Recorder::MemorySample;
  CHECK(rec.memory() == std::vector<S>{{0, 0, 100}, {0, 1, 200}, {0, 3, 130}, {0, 4, 100}, {0, 5, 30}, {0, 6, 0}});
  CHECK(r.step_time_s == 6);
  CHECK(r.ranks[0].activation_peak_bytes == 200);
  CHECK(r.ranks[0].peak_memory_bytes == 5200);
  CHECK(r.ranks[0].peak_inflight_microbatches == 2);
  CHECK(r.bubble_fraction == 0);
}

TEST_CASE("the composite F&BW is charged F of one plus BW of the other", "[sim][memory]") {
  // One rank, one stage, m = 2, F = 1, B = 2, W = 1: F0 [0,1], F1 overlapped with BW0 (1 + 3 s) [1,5],
  // BW1 (3 s) [5,8]. Memory: 100 at F0, 200 when F1&BW0 starts, 100 at its end, 0 after BW1.
  SimInput in = sim_input(hand_schedule(2, {0}, {{"0F0", "0F1&0BW0", "0BW1"}}, false), uniform_costs(1, 1, 2, 1, 100),
                          ideal_cluster());
  Recorder rec;
  const SimResult r = simulate(in, &rec);
  CHECK(r.step_time_s == 8);
  using S = Recorder::MemorySample;
  CHECK(rec.memory() == std::vector<S>{{0, 0, 100}, {0, 1, 200}, {0, 5, 100}, {0, 8, 0}});
  CHECK(r.ranks[0].peak_inflight_microbatches == 2);
}

TEST_CASE("gradient reduction overlaps later compute or is exposed", "[sim][dp]") {
  // T = 33 s (see one_f_one_b). The last stage's last BW ends at T - 3 x 2 = 27 s; a reduction of
  // g <= 6 s on its collective lane is hidden behind ranks 0..2 still working; g = 8 s ends at 35 s.
  // Stage 0's last BW is the last compute of all: its reduction adds g to the step.
  {
    SimInput in = one_f_one_b();
    in.stages[3].grad_reduce_s = 5;
    Recorder rec;
    const SimResult r = simulate(in, &rec);
    CHECK(r.step_time_s == 33);
    bool found = false;
    for (const SimEvent& e : rec.events()) {
      if (e.lane != Lane::Collective) continue;
      found = true;
      CHECK(e.rank == 3);
      CHECK(e.action.stage == 3);
      CHECK(e.action.microbatch == -1);
      CHECK(e.start_s == 27);
      CHECK(e.end_s == 32);
    }
    CHECK(found);
  }
  {
    SimInput in = one_f_one_b();
    in.stages[3].grad_reduce_s = 8;
    CHECK(simulate(in).step_time_s == 35);
  }
  {
    SimInput in = one_f_one_b();
    in.stages[0].grad_reduce_s = 2;
    const SimResult r = simulate(in);
    CHECK(r.step_time_s == 35);
    CHECK(r.pipeline_time_s == 33);
    // The reduction after the last compute is exposed dp communication, not bubble: each rank's idle
    // time less those 2 s, bubble = (4 x 35 - 4 x 24 - 4 x 2) / (4 x 35).
    CHECK(r.exposed_dp_comm_s == 2);
    CHECK(r.bubble_fraction == Approx((4 * 35.0 - 4 * 24.0 - 4 * 2.0) / (4 * 35.0)).epsilon(1e-12));
  }
}

TEST_CASE("bucketed reduction: each bucket reduces as the last backward fills it, the tail is exposed", "[sim][dp]") {
  // Stage 0's last BW (2 s) is the last compute: [31, 33]. Four buckets of 0.75 s fill at 31.5, 32, 32.5
  // and 33 (the last with a 0.25 s all-gather): the lane runs [31.5, 32.25], [32.25, 33], [33, 33.75],
  // [33.75, 34.75]. Exposed: 1.75 s, against 3.25 s for the same reduction in one piece after the BW.
  SimInput in = one_f_one_b();
  StageCost& c = in.stages[0];
  c.grad_buckets = 4;
  c.grad_bucket_s = 0.75;
  c.grad_gather_s = 0.25;
  c.grad_reduce_s = 4 * 0.75 + 0.25;
  c.grad_reduce_bytes = 4e9;
  Recorder rec;
  const SimResult r = simulate(in, &rec);
  CHECK(r.step_time_s == 34.75);
  CHECK(r.exposed_dp_comm_s == 1.75);
  std::vector<std::pair<double, double>> pieces;
  double bytes = 0;
  for (const SimEvent& e : rec.events())
    if (e.lane == Lane::Collective) {
      pieces.emplace_back(e.start_s, e.end_s);
      bytes += e.bytes;
    }
  CHECK(pieces == std::vector<std::pair<double, double>>{{31.5, 32.25}, {32.25, 33}, {33, 33.75}, {33.75, 34.75}});
  CHECK(bytes == 4e9);
  c.grad_buckets = 1;
  CHECK(simulate(in).exposed_dp_comm_s == 3.25);
}

TEST_CASE("a rank's reductions run one after the other on its collective lane", "[sim][dp]") {
  // Interleaved, p = 2, v = 2: rank 0 holds stages 0 and 2. Stage 2's last backward ends first; with
  // 100 s reductions stage 0's waits for stage 2's: it starts at t2 + 100 and the step ends at t2 + 200.
  SimInput in = sim_input(generated("interleaved", 2, 2, 2), uniform_costs(4, 0.5, 0.75, 0.25), ideal_cluster());
  for (auto& c : in.stages) c.grad_reduce_s = 100;
  Recorder rec;
  const SimResult r = simulate(in, &rec);
  double t2 = -1;
  for (const SimEvent& e : rec.events())
    if (e.lane == Lane::Compute && e.rank == 0 && e.action.stage == 2) t2 = std::max(t2, e.end_s);
  std::map<int, std::pair<double, double>> reduce;  // stage -> (start, end) on rank 0
  for (const SimEvent& e : rec.events())
    if (e.lane == Lane::Collective && e.rank == 0) reduce[e.action.stage] = {e.start_s, e.end_s};
  REQUIRE(reduce.size() == 2);
  CHECK(reduce[2].first == t2);
  CHECK(reduce[0].first == t2 + 100);
  CHECK(r.step_time_s == t2 + 200);
}

TEST_CASE("the optimizer step follows the flush", "[sim][optimizer]") {
  // Synchronous: every rank waits for the whole flush, then the slowest rank's optimizer: 33 + max over
  // ranks of its stages' optimizer_s. Asynchronous: each rank steps when it is done itself; rank 3 is
  // done at 27 s, so 27 + 10 = 37 s, against 33 + 10 = 43 s synchronised.
  SimInput in = one_f_one_b();
  for (auto& c : in.stages) c.optimizer_s = 0.25;
  CHECK(simulate(in).step_time_s == 33.25);
  in.stages[3].optimizer_s = 10;
  CHECK(simulate(in).step_time_s == 43);
  in.synchronous_optimizer = false;
  CHECK(simulate(in).step_time_s == 37);
  // Interleaved with two chunks per rank: a rank steps both of its stages, 2 x 0.25.
  SimInput il = sim_input(generated("interleaved", 2, 2, 2), uniform_costs(4, 0.5, 0.75, 0.25), ideal_cluster());
  const double flush = simulate(il).step_time_s;
  for (auto& c : il.stages) c.optimizer_s = 0.25;
  CHECK(simulate(il).step_time_s == flush + 0.5);
}

TEST_CASE("observers see every action once, sends paired with receives", "[sim][observer]") {
  // 1F1B p = 4, m = 8 on a finite link: 2 m compute actions per rank, 2 (p - 1) m sends; every send event has one
  // receive event with its flow id on the next or previous rank, which ends no earlier than the transfer.
  SimInput in = sim_input(generated("1f1b", 4, 8), uniform_costs(4, 1e-3, 1.5e-3, 0.5e-3, 10, 0, 1e6),
                          one_node_cluster(10e9, 5e-6));
  Recorder rec;
  const SimResult r = simulate(in, &rec);
  CHECK(rec.starts() == 1);
  CHECK(rec.finishes() == 1);
  CHECK(rec.ranks() == 4);
  CHECK(rec.step_time_s() == r.step_time_s);
  std::map<long, const SimEvent*> sends, recvs;
  std::vector<int> compute(4, 0);
  std::vector<double> last_end(4, 0);
  for (const SimEvent& e : rec.events()) {
    CHECK(e.end_s >= e.start_s);
    if (e.lane == Lane::Compute) {
      ++compute[e.rank];
      CHECK(e.start_s >= last_end[e.rank]);  // one at a time
      last_end[e.rank] = e.end_s;
    } else if (e.lane == Lane::Send) {
      CHECK(sends.emplace(e.flow_id, &e).second);
    } else if (e.lane == Lane::Recv) {
      CHECK(recvs.emplace(e.flow_id, &e).second);
    }
  }
  for (int c : compute) CHECK(c == 16);
  REQUIRE(sends.size() == 2 * 3 * 8);
  REQUIRE(recvs.size() == sends.size());
  for (const auto& [id, s] : sends) {
    const SimEvent* v = recvs.at(id);
    CHECK(std::abs(v->rank - s->rank) == 1);
    CHECK(v->end_s >= s->end_s);
    CHECK(v->bytes == 1e6);
  }
  CHECK(r.actions == static_cast<long>(4 * 16 + 2 * sends.size()));
  std::vector<double> in_use(4, -1);
  for (const auto& m : rec.memory()) in_use[m.rank] = m.bytes_in_use;
  for (double b : in_use) CHECK(b == 0);  // everything allocated is freed by the end
}

TEST_CASE("a compute-only schedule is lowered first, the result is the same", "[sim]") {
  const Schedule s = generated("interleaved", 4, 8, 2);
  const auto costs = uniform_costs(8, 0.5, 0.75, 0.25, 1, 0, 1e5);
  Recorder a, b;
  const SimResult ra = simulate(sim_input(s, costs, one_node_cluster(1e9, 1e-6)), &a);
  const SimResult rb = simulate(sim_input(lower(s), costs, one_node_cluster(1e9, 1e-6)), &b);
  CHECK(ra.step_time_s == rb.step_time_s);
  CHECK(a.events() == b.events());
}

TEST_CASE("two runs give identical event lists", "[sim][determinism]") {
  // Shared links (ranks on GPUs {0, 1, 0, 1}), many equal-time events: the (time, push order) rule makes
  // the runs identical, events and memory samples alike.
  SimInput in = sim_input(generated("interleaved", 4, 8, 2), uniform_costs(8, 1e-3, 1e-3, 1e-3, 10, 4, 2e6),
                          one_node_cluster(1e9, 2e-6));
  in.rank_gpu = {0, 1, 0, 1};
  for (auto& c : in.stages) c.grad_reduce_s = 3e-3;
  Recorder a, b;
  const SimResult ra = simulate(in, &a);
  const SimResult rb = simulate(in, &b);
  CHECK(ra.step_time_s == rb.step_time_s);
  CHECK(a.events().size() > 100);
  CHECK(a.events() == b.events());
  CHECK(a.memory() == b.memory());
}

TEST_CASE("inconsistent input is refused with the field and the fix", "[sim][errors]") {
  SimInput in = one_f_one_b();
  in.stages.pop_back();
  CHECK(error_of(in) == "stage costs: 3 given, the schedule 1f1b has 4 stages; give one cost per stage");

  in = one_f_one_b();
  in.stages[1].forward_s = -1;
  CHECK(error_of(in) == "stage costs: stage 1 forward_s is -1; it must be a finite number >= 0");

  in = one_f_one_b();
  in.rank_gpu = {0, 1};
  CHECK(error_of(in) == "rank_gpu: 2 entries for 4 pipeline ranks; give one GPU per rank or none");

  in = one_f_one_b();
  in.cluster = one_node_cluster(0, 0);
  CHECK(error_of(in) ==
        "cluster test-node: the link from GPU 0 to GPU 1 has bandwidth 0 B/s; give it a positive "
        "bandwidth_bytes_per_s");

  const auto two = uniform_costs(2, 1, 1, 1);
  in = sim_input(
      hand_schedule(1, {0, 1}, {{"0F0", "0RECV_B0", "0BW0", "0SEND_F0"}, {"1RECV_F0", "1F0", "1BW0", "1SEND_B0"}},
                    true),
      two, ideal_cluster());
  // Receives are posted where they stand and waited for by the action consuming them: rank 0 sends its
  // forward only after the backward that needs rank 1's gradient, which needs that forward.
  CHECK(error_of(in) ==
        "schedule hand: deadlock: rank 0 at 0BW0, rank 1 at 1F0 wait for data no rank can send; reorder the "
        "sends and receives");
  // A receive posted early is no deadlock: rank 0 posts RECV_B0 first, computes and sends F0, then waits.
  in = sim_input(
      hand_schedule(1, {0, 1}, {{"0RECV_B0", "0F0", "0SEND_F0", "0BW0"}, {"1RECV_F0", "1F0", "1BW0", "1SEND_B0"}},
                    true),
      two, ideal_cluster());
  CHECK(error_of(in) == "(no error)");

  in.schedule = hand_schedule(1, {0, 1}, {{"0F0", "0BW0"}, {"1RECV_F0", "1F0", "1BW0"}}, true);
  CHECK(error_of(in) == "schedule hand: rank 1 has 1RECV_F0 but no rank sends it");

  in.schedule = hand_schedule(1, {0, 1}, {{"0F0", "0SEND_F0", "0BW0"}, {"1F0", "1BW0"}}, true);
  CHECK(error_of(in) == "schedule hand: rank 0 has 0SEND_F0 but rank 1 never receives it");

  in.schedule = hand_schedule(1, {0, 1}, {{"0SEND_F0", "0F0", "0BW0"}, {"1RECV_F0", "1F0", "1BW0"}}, true);
  CHECK(error_of(in) == "schedule hand: rank 0 has 0SEND_F0 before the action that computes its tensor");

  in.schedule = hand_schedule(1, {0, 1}, {{"0F0", "1F0"}, {"0BW0", "1BW0"}}, true);
  CHECK(error_of(in) == "schedule hand: rank 0 has 1F0, but the placement puts stage 1 on rank 1");

  in.schedule = hand_schedule(1, {0, 1}, {{"0F0", "0BW1"}, {"1F0", "1BW0"}}, true);
  CHECK(error_of(in) == "schedule hand: rank 0 has 0BW1; stages are 0..1 and micro-batches 0..0");
}

TEST_CASE("ZeRO-2/3: every micro-batch's gradients are reduce-scattered, the last as the step's reduction", "[sim][dp]") {
  // Rank 3 (stage 3) runs its 8 BWs; each of the first 7 queues a 0.5 s reduction at its end, the last the
  // bucketed one. 8 collective slices on rank 3; the step's end is unchanged while they hide.
  SimInput in = one_f_one_b();
  StageCost& c = in.stages[3];
  c.grad_reduce_s = 0.5;
  c.grad_bucket_s = 0.5;
  c.grad_reduce_bytes = 1e9;
  c.reduce_every_microbatch = true;
  Recorder rec;
  const SimResult r = simulate(in, &rec);
  int slices = 0;
  for (const SimEvent& e : rec.events())
    if (e.lane == Lane::Collective) {
      CHECK(e.rank == 3);
      CHECK(e.end_s - e.start_s == 0.5);
      CHECK(e.bytes == 1e9);
      ++slices;
    }
  CHECK(slices == 8);
  CHECK(r.step_time_s == 33);
}
