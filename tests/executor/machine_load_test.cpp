// The shared-machine judgement of a run: the rank threads' CPU time in their compute against its wall
// time, with the load average and the cores as the explanation.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "executor/machine_load.hpp"

using namespace pw;

namespace {

// Measured iterations in which rank r computed wall[r] seconds, cpu[r] of them on a core; one warm-up
// iteration before them with no CPU time at all, which must not count.
RankIteration computed(double wall_s, double cpu_s) {
  RankIteration r;
  r.busy_s = wall_s;
  r.busy_cpu_s = cpu_s;
  return r;
}

RunResult run_of(const std::vector<double>& wall, const std::vector<double>& cpu, int iterations) {
  RunResult r;
  IterationRecord warmup;
  warmup.warmup = true;
  for (double w : wall) warmup.ranks.push_back(computed(w, 0));
  r.iterations.push_back(warmup);
  for (int i = 0; i < iterations; ++i) {
    IterationRecord it;
    for (size_t k = 0; k < wall.size(); ++k) it.ranks.push_back(computed(wall[k], cpu[k]));
    r.iterations.push_back(it);
  }
  return r;
}

}  // namespace

TEST_CASE("machine load: the measured iterations' compute, CPU time over wall time, and the rank that got least") {
  const MachineLoad load = machine_load_of(run_of({0.010, 0.020}, {0.009, 0.008}, 3), 5.1, 2);
  CHECK(load.ranks == 2);
  CHECK(load.compute_wall_s == Approx(0.090));
  CHECK(load.compute_cpu_s == Approx(0.051));
  CHECK(load.cpu_share() == Approx(0.051 / 0.090));
  CHECK(load.lowest_rank == 1);
  CHECK(load.lowest_rank_cpu_share == Approx(0.4));
}

TEST_CASE("machine load: ranks well below a core each are judged shared, in one line with the load") {
  SECTION("another program took the cores") {
    const LoadVerdict v = judge_machine_load(machine_load_of(run_of({0.010, 0.010}, {0.004, 0.0036}, 2), 5.1, 2), true);
    CHECK(v.judged);
    CHECK(v.shared);
    CHECK(v.line ==
          "ranks ran 38% of their compute time on a core (rank 1 36%); load average 5.1 on 2 cores: the machine was "
          "shared, measured times are not comparable with the prediction");
  }
  SECTION("the run itself has more ranks than cores") {
    const RunResult four_ranks = run_of({0.01, 0.01, 0.01, 0.01}, {0.005, 0.005, 0.006, 0.005}, 1);
    const LoadVerdict v = judge_machine_load(machine_load_of(four_ranks, 4.0, 2), true);
    CHECK(v.shared);
    CHECK(v.line ==
          "ranks ran 52% of their compute time on a core (rank 0 50%); load average 4.0 on 2 cores: 4 ranks shared 2 "
          "cores, measured times are not comparable with the prediction");
    // Predicted with the ranks taking turns on the cores: their short share is their own.
    const LoadVerdict own = judge_machine_load(machine_load_of(four_ranks, 2.3, 2), true, 0, true);
    CHECK_FALSE(own.shared);
    CHECK(own.line == "ranks ran 52% of their compute time on a core (rank 0 50%); load average 2.3 on 2 cores, 4 ranks "
                      "taking turns on them as predicted");
    // Other programs still make it shared: load 3.0 is 1.0 beyond the ranks' own 2.
    const LoadVerdict others = judge_machine_load(machine_load_of(four_ranks, 3.0, 2), true, 0, true);
    CHECK(others.shared);
    CHECK(others.line == "ranks ran 52% of their compute time on a core (rank 0 50%); load average 3.0 on 2 cores, 4 "
                         "ranks taking turns on them as predicted: other programs kept 1.0 cores busy, the machine was "
                         "shared, measured times are not comparable with the prediction");
  }
  SECTION("a core each, but other programs kept the other cores busy (a niced build beside the run)") {
    // Load 2.8 on 2 cores with 2 ranks: 0.8 beyond the ranks' own, above 0.25 x 2 cores.
    const LoadVerdict v = judge_machine_load(machine_load_of(run_of({0.010, 0.010}, {0.0099, 0.0099}, 2), 2.8, 2), true);
    CHECK(v.shared);
    CHECK(v.line ==
          "ranks ran 99% of their compute time on a core (rank 0 99%); load average 2.8 on 2 cores: other programs "
          "kept 0.8 cores busy, the machine was shared, measured times are not comparable with the prediction");
    // 2.5 is 0.5 beyond: at the threshold, not shared.
    CHECK_FALSE(judge_machine_load(machine_load_of(run_of({0.010, 0.010}, {0.0099, 0.0099}, 2), 2.5, 2), true).shared);
  }
  SECTION("an unreadable load average is said so") {
    const LoadVerdict v = judge_machine_load(machine_load_of(run_of({0.01}, {0.002}, 1), -1, 1), true);
    CHECK(v.line ==
          "ranks ran 20% of their compute time on a core; load average unknown, 1 core: the machine was shared, measured "
          "times are not comparable with the prediction");
  }
}

TEST_CASE("machine load: a core each, or no CPU compute to judge by, is not called shared") {
  const LoadVerdict quiet = judge_machine_load(machine_load_of(run_of({0.010, 0.010}, {0.0099, 0.0085}, 2), 1.23, 2), true);
  CHECK(quiet.judged);
  CHECK_FALSE(quiet.shared);
  CHECK(quiet.line == "ranks ran 92% of their compute time on a core (rank 1 85%); load average 1.2 on 2 cores");
  // At the threshold exactly: 80% is a core each.
  CHECK_FALSE(judge_machine_load(machine_load_of(run_of({0.010}, {0.008}, 1), 1, 2), true).shared);
  // Sleep compute spends no CPU time in its actions: its share says nothing.
  const LoadVerdict sleeping = judge_machine_load(machine_load_of(run_of({0.010, 0.010}, {0, 0}, 2), 0.5, 8), false);
  CHECK_FALSE(sleeping.judged);
  CHECK_FALSE(sleeping.shared);
  CHECK(sleeping.line == "load average 0.5 on 8 cores; not judged without CPU compute (sleep compute, GPU kernels)");
}

TEST_CASE("machine load: the load average is /proc/loadavg's first field, -1 when it cannot be read") {
  const std::string path = std::string(PIPEWRIGHT_TEST_TMP) + "/loadavg";
  std::ofstream(path) << "5.12 3.40 2.01 3/412 12345\n";
  CHECK(read_load_average(path) == Approx(5.12));
  std::ofstream(path) << "garbage\n";
  CHECK(read_load_average(path) == -1);
  CHECK(read_load_average("/nonexistent/loadavg") == -1);
  CHECK(usable_cores() >= 1);
}

TEST_CASE("with replicas the rank furthest from a core is named with its replica") {
  // Workers 0..3: replica 0's ranks 0 and 1, then replica 1's; worker 3 got the least of a core.
  const LoadVerdict v =
      judge_machine_load(machine_load_of(run_of({0.01, 0.01, 0.01, 0.01}, {0.009, 0.009, 0.009, 0.005}, 1), 1.0, 4), true, 2);
  CHECK(v.line.find("(rank 1 of replica 1 50%)") != std::string::npos);
}
