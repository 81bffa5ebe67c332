// Ranks that share a CPU machine's cores (SimInput::shared_cores): a compute action waits for a core, a
// rank keeps its core while it can go on, a sleeping receiver pays the wake-up when a core is free for it,
// and the synchronous optimizer steps queue for the cores too. Exact timelines on a hand-written 2-rank
// pipeline; invariants on generated ones.
#include <catch2/catch.hpp>

#include <numeric>

#include "core/error.hpp"
#include "sim_test_util.hpp"

using namespace pw;
using namespace pw::test;

namespace {

// GPipe over 2 ranks and 2 micro-batches, F 1 s and the full backward 2 s per stage, on free links.
SimInput two_rank_gpipe(SharedCores shared, double optimizer_s = 0) {
  const Schedule s = hand_schedule(
      2, {0, 1},
      {{"0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0BW0", "0RECV_B1", "0BW1"},
       {"1RECV_F0", "1F0", "1RECV_F1", "1F1", "1BW0", "1SEND_B0", "1BW1", "1SEND_B1"}},
      true);
  std::vector<StageCost> costs = uniform_costs(2, 1, 2, 0);
  for (StageCost& c : costs) c.optimizer_s = optimizer_s;
  SimInput in = sim_input(s, costs, ideal_cluster());
  in.shared_cores = shared;
  return in;
}

}  // namespace

TEST_CASE("shared cores: ranks take turns on one core, each keeping it while it can go on") {
  // Devices of their own: rank 1's forwards at 1 and 2, its backwards 3-7; rank 0's backwards 5-9.
  CHECK(simulate(two_rank_gpipe({})).step_time_s == 9);
  // One core: rank 0 runs both forwards (0-2) and blocks on its first gradient; rank 1 then runs all of its
  // work (2-8) without a break; rank 0's backwards 8-12. The core never idles: the step is all the compute.
  const SimResult one = simulate(two_rank_gpipe({1, 0}));
  CHECK(one.step_time_s == 12);
  CHECK(one.ranks[0].busy_s == 6);
  CHECK(one.ranks[1].busy_s == 6);
  // Half a core (two replicas on one): the same turns at half speed.
  CHECK(simulate(two_rank_gpipe({0.5, 0})).step_time_s == 24);
  // As many cores as ranks: devices of their own.
  CHECK(simulate(two_rank_gpipe({2, 0})).step_time_s == 9);
}

TEST_CASE("shared cores: a sleeping receiver runs again after the wake-up, when a core is free for it") {
  // Devices of their own, wake-up 0.5 s: rank 1 wakes at 1.5 for its first input (the second comes while it
  // computes), rank 0 at 6 for its first gradient; the flush's end wakes every rank once more: 10 + 0.5.
  CHECK(simulate(two_rank_gpipe({0, 0.5})).step_time_s == 10.5);
  // One core: each tensor arrives while the other rank holds the core, so the receiver waits for it in the
  // run queue instead; only the flush's wake-up is left.
  CHECK(simulate(two_rank_gpipe({1, 0.5})).step_time_s == 12.5);
}

TEST_CASE("shared cores: the synchronous optimizer steps queue for the cores") {
  // 1 s per rank: at once on devices of their own, one after the other on one core.
  CHECK(simulate(two_rank_gpipe({}, 1)).step_time_s == 10);
  CHECK(simulate(two_rank_gpipe({1, 0}, 1)).step_time_s == 14);
}

TEST_CASE("shared cores: a step is never shorter than its compute over the cores, nor than on devices") {
  for (const char* name : {"gpipe", "1f1b", "zb-h1"}) {
    INFO(name);
    const Schedule s = generated(name, 8, 16);
    SimInput in = sim_input(s, uniform_costs(8, 1e-3, 1e-3, 0.5e-3), ideal_cluster());
    const double alone = simulate(in).step_time_s;
    for (double cores : {1.0, 2.0, 3.0, 7.0}) {
      INFO(cores);
      in.shared_cores = {cores, 0};
      const SimResult r = simulate(in);
      const double compute = std::accumulate(r.ranks.begin(), r.ranks.end(), 0.0,
                                             [](double sum, const RankStats& st) { return sum + st.busy_s; });
      CHECK(compute == Approx(8 * 16 * 2.5e-3));  // at full speed: whole cores
      CHECK(r.step_time_s >= compute / cores - 1e-12);
      CHECK(r.step_time_s >= alone - 1e-12);
    }
  }
}

TEST_CASE("shared cores: cores or a wake-up that is not a finite number >= 0 is refused") {
  SimInput in = two_rank_gpipe({std::nan(""), 0});
  CHECK_THROWS_WITH(simulate(in), "shared cores: nan cores and a wake-up of 0 s; both must be finite numbers >= 0");
  in.shared_cores = {1, -1};
  CHECK_THROWS_WITH(simulate(in), "shared cores: 1 cores and a wake-up of -1 s; both must be finite numbers >= 0");
}

TEST_CASE("shared cores in turns: a core handed to a waiting rank reaches it a hand-over later") {
  // One core, hand-over 0.25 s: rank 1 asks for the core at 1 (its first input) while rank 0 computes F1, and
  // gets it when rank 0 blocks at 2, at 2.25; rank 0 asks at 6.25 and gets it when rank 1 ends at 8.25, at 8.5:
  // the step is the OS-shared one's 12 plus two hand-overs.
  SharedCores turns{1, 0};
  turns.turns = true;
  turns.handover_s = 0.25;
  const SimResult r = simulate(two_rank_gpipe(turns));
  CHECK(r.step_time_s == 12.5);
  CHECK(r.ranks[0].busy_s == 6);
  CHECK(r.ranks[1].busy_s == 6);
  // Without the hand-over's cost, the same turns as the OS's queue.
  turns.handover_s = 0;
  CHECK(simulate(two_rank_gpipe(turns)).step_time_s == 12);
}

TEST_CASE("shared cores in turns: a rank waiting for a tensor keeps its core until another rank wants one") {
  // One core. Rank 0 sends F0 at 1 and waits for its gradient with nobody queued: it keeps the core, spinning.
  // Rank 1's input arrives at once and it asks for the core: rank 0 hands it over (0.25 s), rank 1 runs F0
  // and BW0 (1.25 to 4.25), and rank 0's gradient finds the core free: BW0 4.25 to 6.25.
  const Schedule s = hand_schedule(2, {0, 1}, {{"0F0", "0SEND_F0", "0RECV_B0", "0BW0"}, {"1RECV_F0", "1F0", "1BW0", "1SEND_B0"}},
                                   true);
  SimInput in = sim_input(s, uniform_costs(2, 1, 2, 0), ideal_cluster());
  in.shared_cores = {1, 0};
  in.shared_cores.turns = true;
  in.shared_cores.handover_s = 0.25;
  CHECK(simulate(in).step_time_s == 6.25);
  // The OS's sharing frees rank 0's core as it blocks: no hand-over.
  in.shared_cores.turns = false;
  CHECK(simulate(in).step_time_s == 6);
}

TEST_CASE("shared cores in turns: a step is never shorter than its compute over the cores, nor than on devices") {
  for (const auto& [name, v] : std::vector<std::pair<const char*, int>>{{"gpipe", 1}, {"1f1b", 1}, {"zb-h1", 1}, {"interleaved", 2}}) {
    INFO(name);
    const Schedule s = generated(name, 8, 16, v);
    SimInput in = sim_input(s, uniform_costs(s.num_stages(), 1e-3, 1e-3, 0.5e-3), ideal_cluster());
    const double alone = simulate(in).step_time_s;
    for (double cores : {1.0, 2.0, 3.0, 7.0}) {
      for (double handover : {0.0, 5e-6, 1e-4}) {
        INFO(cores << " cores, hand-over " << handover);
        in.shared_cores = {cores, 2e-5};
        in.shared_cores.turns = true;
        in.shared_cores.handover_s = handover;
        const SimResult r = simulate(in);
        const double compute = std::accumulate(r.ranks.begin(), r.ranks.end(), 0.0,
                                               [](double sum, const RankStats& st) { return sum + st.busy_s; });
        CHECK(compute == Approx(s.num_stages() * 16 * 2.5e-3));
        CHECK(r.step_time_s >= compute / cores - 1e-12);
        CHECK(r.step_time_s >= alone - 1e-12);
      }
    }
  }
}

TEST_CASE("shared cores: a hand-over that is not a finite number >= 0 is refused") {
  SharedCores turns{1, 0};
  turns.turns = true;
  turns.handover_s = -1e-6;
  CHECK_THROWS_WITH(simulate(two_rank_gpipe(turns)),
                    "shared cores: a hand-over of -1e-06 s; it must be a finite number >= 0");
}
