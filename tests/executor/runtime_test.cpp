// The runtime: actions run in the lowered order, memory follows the schedule, faults stop every rank with an
// error naming the rank and the action, broken schedules never start, and the transport keeps messages apart.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <limits>
#include <memory>
#include <thread>

#include "core/error.hpp"
#include "executor/cpu_backend.hpp"
#include "executor/host_tensor.hpp"
#include "executor/runtime.hpp"
#include "executor/sleep_backend.hpp"
#include "executor/stall_watch.hpp"
#include "executor/transport.hpp"
#include "executor_test_util.hpp"
#include "schedules/generators.hpp"
#include "sim/pipeline_sim.hpp"

using namespace pw;
using test::schedule_of;

namespace {

std::vector<StageCost> sleep_costs(int stages, double f, double b, double w) {
  StageCost c;
  c.forward_s = f;
  c.backward_input_s = b;
  c.backward_weight_s = w;
  c.activation_bytes = 1000;
  c.weight_grad_bytes = 400;
  c.output_bytes = 256;
  return std::vector<StageCost>(static_cast<size_t>(stages), c);
}


double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string run_error(const Schedule& s, Backend& backend, const RunOptions& options) {
  try {
    run_schedule(s, backend, options);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::Runtime);
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("each rank runs its lowered list in order, and the events say so") {
  const Schedule s = schedule_of("zb-h1", 3, 4);
  SleepBackend backend(sleep_costs(3, 1e-4, 1e-4, 1e-4));
  const RunResult r = run_schedule(s, backend);
  const Schedule lowered = lower(s);
  REQUIRE(r.iterations.size() == 1);
  const IterationRecord& it = r.iterations[0];
  for (int rank = 0; rank < 3; ++rank) {
    const RankIteration& ri = it.ranks[static_cast<size_t>(rank)];
    // The lowered list, then the optimizer step as an event of its own, ending the rank's iteration.
    REQUIRE(!ri.events.empty());
    CHECK(ri.events.back().lane == Lane::Optimizer);
    CHECK(ri.events.back().end_s == ri.end_s);
    std::vector<Action> ran;
    for (size_t k = 0; k + 1 < ri.events.size(); ++k) ran.push_back(ri.events[k].action);
    CHECK(ran == lowered.ranks[static_cast<size_t>(rank)]);
    for (size_t k = 1; k < ri.events.size(); ++k) CHECK(ri.events[k].start_s >= ri.events[k - 1].start_s);
    CHECK(ri.end_s <= it.step_time_s);
    // Each compute action sleeps its predicted 0.1 ms: 4 F, 4 B, 4 W.
    CHECK(ri.busy_s >= 12 * 1e-4);
  }
}

TEST_CASE("with sleep compute, activation peaks are the simulator's exactly") {
  for (const std::string name : {"gpipe", "1f1b", "zb-h1", "interleaved"}) {
    const Schedule s = schedule_of(name, 4, 8);
    const std::vector<StageCost> costs = sleep_costs(s.num_stages(), 2e-5, 2e-5, 2e-5);
    SleepBackend backend(costs);
    const RunResult r = run_schedule(s, backend);
    SimInput in;
    in.schedule = s;
    in.stages = costs;
    in.cluster.ideal = true;
    const SimResult sim = simulate(in);
    for (int rank = 0; rank < 4; ++rank) {
      INFO(name << " rank " << rank);
      CHECK(r.activation_peak_bytes[static_cast<size_t>(rank)] == sim.ranks[static_cast<size_t>(rank)].activation_peak_bytes);
      CHECK(r.iterations[0].ranks[static_cast<size_t>(rank)].memory.back().bytes == 0);
    }
  }
}

TEST_CASE("a rank that throws stops every rank, and the error names the rank and the action") {
  const Schedule s = schedule_of("1f1b", 4, 8);
  SleepBackend backend(sleep_costs(4, 1e-4, 1e-4, 1e-4));
  RunOptions options;
  options.timeout_s = 60;
  options.before_action = [](int rank, int, const Action& a) {
    if (rank == 2 && a == Action{Op::BW, 2, 5}) throw std::runtime_error("injected failure");
  };
  const auto start = std::chrono::steady_clock::now();
  CHECK(run_error(s, backend, options) == "rank 2 failed at 2BW5: injected failure");
  CHECK(seconds_since(start) < 5);  // far inside the 60 s timeout: the others were woken, not timed out
}

TEST_CASE("a kernel failure inside the real backend stops the run the same way") {
  const Model model = test::tiny_llama(2);
  CpuBackend backend(model, {{0, 1}, {2, 3}}, CpuBackendConfig{});
  RunOptions options;
  options.warmup = 1;
  options.iterations = 2;
  options.before_action = [](int rank, int iteration, const Action& a) {
    if (iteration == 2 && rank == 0 && a.op == Op::F && a.microbatch == 1) throw std::runtime_error("out of memory");
  };
  CHECK(run_error(schedule_of("gpipe", 2, 3), backend, options) == "rank 0 failed at 0F1: out of memory");
  CHECK(backend.losses().size() == 2);
}

TEST_CASE("a receive that waits past the timeout fails with the missing message named") {
  // Every forward takes 0.3 s, none longer than the 0.45 s timeout, but rank 2 waits for two of them in turn.
  const Schedule s = schedule_of("gpipe", 3, 2);
  SleepBackend backend(sleep_costs(3, 0.3, 1e-4, 1e-4));
  RunOptions options;
  options.timeout_s = 0.45;
  const auto start = std::chrono::steady_clock::now();
  CHECK(run_error(s, backend, options) == "rank 2 failed at 2RECV_F0: no message from rank 1 (1SEND_F0) within 0.45 s");
  CHECK(seconds_since(start) < 3);
}

TEST_CASE("a rank that waits for the others past the timeout fails at the barrier, and a sleeping rank wakes") {
  std::vector<StageCost> costs = sleep_costs(2, 1e-4, 1e-4, 1e-4);
  costs[1].optimizer_s = 30;  // rank 1's optimizer step outlasts rank 0's wait for the next iteration
  SleepBackend backend(costs);
  RunOptions options;
  options.iterations = 2;
  options.timeout_s = 0.2;
  const auto start = std::chrono::steady_clock::now();
  CHECK(run_error(schedule_of("1f1b", 2, 2), backend, options) ==
        "rank 0 failed at the start of an iteration: the other ranks did not arrive within 0.2 s");
  CHECK(seconds_since(start) < 3);
}

namespace {

// A sleep-compute run whose ranks are held at the given actions until release(). The backend travels with
// the hook, so that it outlives the run when a held rank's thread is given up and finishes later.
struct HeldRun {
  HeldRun(int stages, double timeout_s, std::vector<std::pair<int, Action>> holds)
      : backend(std::make_shared<SleepBackend>(sleep_costs(stages, 1e-4, 1e-4, 1e-4))) {
    options.timeout_s = timeout_s;
    options.before_action = [backend = backend, holds, released = released.get_future().share()](int r, int, const Action& a) {
      for (const auto& [rank, where] : holds)
        if (r == rank && a == where) released.wait();
    };
  }

  // The message of the RankStalled the run threw, or what happened instead.
  std::string stall_error(const Schedule& s) {
    try {
      run_schedule(s, *backend, options);
    } catch (const RankStalled& e) {
      return e.what();
    } catch (const Error& e) {
      return std::string("not a stall: ") + e.what();
    }
    return "no error";
  }

  std::shared_ptr<SleepBackend> backend;
  std::promise<void> released;
  RunOptions options;
};

void wait_until_no_rank_thread_left() {
  const auto start = std::chrono::steady_clock::now();
  while (rank_threads_left_running() > 0 && seconds_since(start) < 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace

TEST_CASE("a rank thread that stalls inside an action ends the run after the timeout, its thread given up") {
  HeldRun run(2, 0.3, {{0, Action{Op::F, 0, 1}}});
  const auto start = std::chrono::steady_clock::now();
  // Rank 1's receive timed out too, at about the same time: the stalled rank is the run's error.
  CHECK(run.stall_error(schedule_of("1f1b", 2, 4)) ==
        "rank 0 stalled at 0F1: it did not return within 0.3 s; the run ended without it");
  CHECK(seconds_since(start) < 3);
  CHECK(rank_threads_left_running() == 1);
  // Released, the thread finds the run stopped and ends by itself.
  run.released.set_value();
  wait_until_no_rank_thread_left();
  CHECK(rank_threads_left_running() == 0);
}

TEST_CASE("with every rank stalled, or a single rank, nobody waits: the watch alone ends the run") {
  SECTION("one rank") {
    HeldRun run(1, 0.2, {{0, Action{Op::BW, 0, 2}}});
    CHECK(run.stall_error(schedule_of("gpipe", 1, 4)) ==
          "rank 0 stalled at 0BW2: it did not return within 0.2 s; the run ended without it");
    run.released.set_value();
  }
  SECTION("two ranks, each inside its own action") {
    HeldRun run(2, 0.2, {{0, Action{Op::F, 0, 1}}, {1, Action{Op::F, 1, 0}}});
    CHECK(run.stall_error(schedule_of("gpipe", 2, 4)) ==
          "rank 0 stalled at 0F1 and rank 1 at 1F0: they did not return within 0.2 s; the run ended without them");
    CHECK(rank_threads_left_running() == 2);
    run.released.set_value();
  }
  wait_until_no_rank_thread_left();
  CHECK(rank_threads_left_running() == 0);
}

TEST_CASE("a rank still finishing its action when another fails is waited for, not given up") {
  SleepBackend backend(sleep_costs(2, 1e-4, 1e-4, 1e-4));
  RunOptions options;
  options.timeout_s = 5;
  options.before_action = [](int rank, int, const Action& a) {
    if (rank == 1 && a == Action{Op::F, 1, 0}) throw std::runtime_error("injected failure");
    if (rank == 0 && a == Action{Op::F, 0, 1}) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  };
  CHECK(run_error(schedule_of("gpipe", 2, 4), backend, options) == "rank 1 failed at 1F0: injected failure");
  CHECK(rank_threads_left_running() == 0);
}

TEST_CASE("the timeout is bounded: NaN, infinities and more than a day are refused before anything runs") {
  SleepBackend backend(sleep_costs(2, 1e-4, 1e-4, 1e-4));
  for (double bad : {0.0, -1.0, 1e-4, 86401.0, 1e10, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    RunOptions options;
    options.timeout_s = bad;
    try {
      run_schedule(schedule_of("gpipe", 2, 2), backend, options);
      FAIL("ran with --timeout " << bad);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::BadInput);
      CHECK(std::string(e.what()) ==
            fmt::format("--timeout: must be a number of seconds from 0.001 to 86400 (a day), got {:g}", bad));
    }
  }
  RunOptions longest;
  longest.timeout_s = kMaxTimeoutS;  // the deadline a day ahead does not overflow the clock
  CHECK(run_schedule(schedule_of("gpipe", 2, 2), backend, longest).iterations.size() == 1);
}

TEST_CASE("a schedule with a dependency dropped is rejected by the validator before anything runs") {
  Schedule broken = lower(schedule_of("1f1b", 2, 3));
  // Rank 1 no longer receives micro-batch 1's forward input.
  auto& list = broken.ranks[1];
  list.erase(std::find(list.begin(), list.end(), Action{Op::RecvF, 1, 1}));
  SleepBackend backend(sleep_costs(2, 1e-4, 1e-4, 1e-4));
  int actions_run = 0;
  RunOptions options;
  options.before_action = [&](int, int, const Action&) { ++actions_run; };
  try {
    run_schedule(broken, backend, options);
    FAIL("the broken schedule ran");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(std::string(e.what()).rfind("schedule 1f1b: ", 0) == 0);
  }
  CHECK(actions_run == 0);

  // Swapping a stage's B ahead of its own F is caught the same way on a compute-only schedule.
  Schedule swapped = schedule_of("gpipe", 2, 2);
  std::swap(swapped.ranks[0][0], swapped.ranks[0][2]);
  CHECK_THROWS_AS(run_schedule(swapped, backend, options), Error);
  CHECK(actions_run == 0);
}

TEST_CASE("the thread transport keys messages by sender and action, copies them, and wakes on abort") {
  ThreadTransport t(3);
  auto tensor = [](float v) { return std::make_shared<HostTensor>(Mat::Constant(1, 2, v)); };
  const auto value = [](const Message& m) { return static_cast<const HostTensor&>(*m.tensor).value(0, 0); };
  const auto later = Clock::now() + std::chrono::seconds(5);
  auto sent = tensor(1);
  t.send(0, 1, MessageKey{0, Op::SendF, 0, 0}, Message{sent, Clock::now(), 7});
  t.send(0, 1, MessageKey{0, Op::SendF, 0, 1}, Message{tensor(2), Clock::now(), 8});
  t.send(2, 1, MessageKey{0, Op::SendB, 2, 0}, Message{tensor(3), Clock::now(), 9});
  sent->value(0, 0) = 100;  // the sender's buffer is its own again
  CHECK(value(t.recv(1, 2, MessageKey{0, Op::SendB, 2, 0}, later)) == 3);
  const Message m1 = t.recv(1, 0, MessageKey{0, Op::SendF, 0, 1}, later);
  CHECK(value(m1) == 2);
  CHECK(m1.flow_id == 8);
  CHECK(value(t.recv(1, 0, MessageKey{0, Op::SendF, 0, 0}, later)) == 1);
  // The same key from another iteration is another message.
  CHECK_THROWS_AS(t.recv(1, 0, MessageKey{1, Op::SendF, 0, 0}, Clock::now() + std::chrono::milliseconds(20)), RecvTimeout);

  std::thread waiter([&] { CHECK_THROWS_AS(t.recv(2, 0, MessageKey{0, Op::SendF, 1, 0}, later), RunAborted); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto start = std::chrono::steady_clock::now();
  t.abort();
  waiter.join();
  CHECK(seconds_since(start) < 1);
}

TEST_CASE("warm-up iterations are marked and every iteration has its own step time") {
  SleepBackend backend(sleep_costs(2, 1e-4, 1e-4, 1e-4));
  RunOptions options;
  options.warmup = 2;
  options.iterations = 3;
  const RunResult r = run_schedule(schedule_of("gpipe", 2, 2), backend, options);
  REQUIRE(r.iterations.size() == 5);
  for (int i = 0; i < 5; ++i) {
    CHECK(r.iterations[static_cast<size_t>(i)].warmup == (i < 2));
    // Fill and drain of gpipe with 2 micro-batches: (m + p - 1)(F + BW) = 3 x 0.3 ms at least.
    CHECK(r.iterations[static_cast<size_t>(i)].step_time_s >= 9e-4);
  }
}
