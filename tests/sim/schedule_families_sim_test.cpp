#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "schedules/timing.hpp"
#include "sim/pipeline_sim.hpp"
#include "sim_test_util.hpp"

using namespace pw;
using namespace pw::test;

// With free communication and no optimizer or reduction time the simulator's pipeline time is the
// dependency-driven makespan that schedules/timing.hpp computes; these tie the two together for the
// families of issue 5, and check the simulator's own additions: the F&B composite's measured time and
// optimizer post-validation over several iterations.

TEST_CASE("every family simulates to the ASAP makespan on the ideal cluster", "[sim][families]") {
  for (const std::string& name : schedule_names()) {
    for (int p = 1; p <= 4; ++p) {
      if (name == "dualpipe" && p % 2 != 0) continue;  // its two halves need an even pp
      const bool v_shaped =
          name == "zb-v" || name == "v-half" || name == "v-min" || name == "dualpipev" || name == "dualpipe";
      const int chunks = chunks_per_rank(name, 2);
      const int stages = p * (v_shaped ? 2 : chunks);
      CAPTURE(name, p);
      const Schedule s = generated(name, p, 2 * p, chunks);
      const SimResult r = simulate(sim_input(s, uniform_costs(stages, 1, 2, 1), ideal_cluster()));
      CHECK(r.pipeline_time_s == asap_makespan(s, StageTimes::uniform(stages, 1, 2, 1)));
      CHECK(r.step_time_s == r.pipeline_time_s);
    }
  }
}

TEST_CASE("an F&B composite costs its stage's overlapped_fb_s, or F + B + W when that is 0", "[sim][families]") {
  // DualPipeV on 2 ranks, 4 micro-batches: each rank runs 3 composites (2(m - 2p + r + 1) in the main
  // phase, one fewer on the last rank, and p - r - 1 in the drain). With F = B = W = 1 a composite
  // costs 3 unless the stage says otherwise; each one measured at 2 takes 1 s off its rank's busy time.
  const Schedule s = generated("dualpipev", 2, 4);
  auto costs = uniform_costs(4, 1, 1, 1);
  const SimResult plain = simulate(sim_input(s, costs, ideal_cluster()));
  CHECK(plain.ranks[0].busy_s == 2 * 4 * 3);
  for (auto& c : costs) c.overlapped_fb_s = 2;
  const SimResult overlapped = simulate(sim_input(s, costs, ideal_cluster()));
  CHECK(overlapped.ranks[0].busy_s == 2 * 4 * 3 - 3);
  CHECK(overlapped.ranks[1].busy_s == 2 * 4 * 3 - 3);
  StageTimes t = StageTimes::uniform(4, 1, 1, 1);
  t.fb.assign(4, 2);
  CHECK(overlapped.pipeline_time_s == asap_makespan(s, t));
  CHECK(overlapped.step_time_s < plain.step_time_s);
  costs[0].overlapped_fb_s = -1;
  try {
    simulate(sim_input(s, costs, ideal_cluster()));
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "stage costs: stage 0 overlapped_fb_s is -1; it must be a finite number >= 0");
  }
}

TEST_CASE("optimizer post-validation: ZB-H2 loses its start-up bubble in the steady state", "[sim][optimizer]") {
  // F = B = W = 1, free links, no optimizer time. Synchronised, every iteration is ZB-H2's
  // 3m + (p - 1): the last rank waits (p - 1) for the first forward. Without the barrier each rank
  // starts the next iteration when it is done with this one; rank 0, whose Ws fill the cool-down,
  // is busy without a gap, so iterations follow one another every 3m: the zero bubble of the
  // zero-bubble paper. 1F1B gains nothing: its rank 0 idles (p - 1) 3 in every iteration either way.
  for (auto [p, m] : {std::pair{2, 4}, {4, 8}, {4, 12}, {6, 12}}) {
    CAPTURE(p, m);
    SimInput zb = sim_input(generated("zb-h2", p, m), uniform_costs(p, 1, 1, 1), ideal_cluster());
    CHECK(simulate(zb).step_time_s == 3 * m + (p - 1));
    zb.synchronous_optimizer = false;
    zb.iterations = 4;
    const SimResult steady = simulate(zb);
    CHECK(steady.iterations == 4);
    CHECK(steady.iteration_end_s.size() == 4);
    CHECK(steady.step_time_s == 3 * m);
    CHECK(steady.bubble_fraction == Approx(0).margin(1e-12));
    CHECK(steady.simulated_time_s == steady.iteration_end_s.back());
    for (const RankStats& r : steady.ranks) CHECK(r.busy_s == 3 * m);

    SimInput one = sim_input(generated("1f1b", p, m), uniform_costs(p, 1, 1, 1), ideal_cluster());
    one.synchronous_optimizer = false;
    one.iterations = 3;
    CHECK(simulate(one).step_time_s == 3 * (m + p - 1));
  }
}

TEST_CASE("optimizer post-validation: each rank steps after its own reductions", "[sim][optimizer]") {
  // 1F1B, p = 2, m = 2, F = B = W = 1: rank 1 ends its iteration at 7, rank 0 at 9. Each stage reduces
  // for 1 s after its last W and steps for 2 s. Synchronised: 9 + 1 + 2 = 12. Back to back, rank 0
  // starts iteration k + 1 at its own 9 + 1 + 2 = 12 from its start, the pipeline repeats every 12:
  // the barrier costs nothing here, since rank 0 finishes last anyway.
  auto costs = uniform_costs(2, 1, 1, 1);
  for (auto& c : costs) {
    c.grad_reduce_s = 1;
    c.optimizer_s = 2;
  }
  SimInput in = sim_input(generated("1f1b", 2, 2), costs, ideal_cluster());
  CHECK(simulate(in).step_time_s == 12);
  in.synchronous_optimizer = false;
  in.iterations = 3;
  const SimResult r = simulate(in);
  CHECK(r.iteration_end_s == std::vector<double>{12, 24, 36});
  CHECK(r.step_time_s == 12);
  in.iterations = 0;
  try {
    simulate(in);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "iterations: must be at least 1, got 0");
  }
}

TEST_CASE("zb-h1 with m = p takes 3 m F + (p - 1) F like any m >= p", "[sim][families]") {
  // The greedy order runs rank 0's W0 before B1 when B1 has not arrived yet, so no slot is lost at
  // m = p either (7 s at p = m = 2, 15 s at p = m = 4).
  for (int p = 1; p <= 8; ++p) {
    CAPTURE(p);
    const SimResult r = simulate(sim_input(generated("zb-h1", p, p), uniform_costs(p, 1, 1, 1), ideal_cluster()));
    CHECK(r.step_time_s == 3 * p + (p - 1));
  }
}
