// Rank threads taking turns on the cores (executor/core_turns.hpp): turns go in the order asked, never more
// holders than cores, a sleeping receiver is queued by its tensor's send, a failure or a timeout leaves no rank
// waiting, and a pipeline run in turns trains exactly as one the OS schedules.
#include <catch2/catch.hpp>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "executor/core_turns.hpp"
#include "executor/cpu_backend.hpp"
#include "executor/host_tensor.hpp"
#include "executor/runtime.hpp"
#include "executor/transport.hpp"
#include "executor_test_util.hpp"
#include "schedules/generators.hpp"

using namespace pw;

namespace {

Clock::time_point turns_deadline() { return Clock::now() + std::chrono::seconds(20); }

// Waits until `n` ranks wait for a turn of `turns` (each take() queues before it sleeps).
void until_queued(const CoreTurns& turns, int n) {
  while (turns.waiting() != n) std::this_thread::yield();
}

// Keeps the test thread's CPUs: a turn binds its holder to one, and the tests after it in this process (and
// the threads they start, which inherit the binding) must run anywhere.
struct KeepCpus {
  KeepCpus() { pthread_getaffinity_np(pthread_self(), sizeof set, &set); }
  ~KeepCpus() { pthread_setaffinity_np(pthread_self(), sizeof set, &set); }
  cpu_set_t set{};
};

// Two ranks' thread transport, their receives taking turns on one core.
struct OneCoreTransport {
  OneCoreTransport() { transport.take_turns(&turns); }
  CoreTurns turns{1};
  ThreadTransport transport{2, /*spin=*/false};
  std::atomic<bool> stop{false};
};

}  // namespace

TEST_CASE("core turns: a free turn at once, then turns handed over in the order they were asked for") {
  const KeepCpus kept;
  CoreTurns turns(1);
  CoreTurn first(&turns);
  first.hold(turns_deadline());
  CHECK(first.held());
  CHECK_FALSE(turns.wanted());

  std::mutex log_mutex;
  std::vector<int> order;
  // A rank that takes the turn, notes that it ran, and gives the turn up.
  const auto rank = [&](CoreTurn& turn, int name) {
    return std::thread([&turn, &log_mutex, &order, name] {
      turn.hold(turns_deadline());
      {
        std::lock_guard lock(log_mutex);
        order.push_back(name);
      }
      turn.give_up();
    });
  };
  CoreTurn second(&turns), third(&turns);
  std::thread b = rank(second, 2);
  until_queued(turns, 1);
  std::thread c = rank(third, 3);
  // Both asked before the only turn frees: they get it in the order they asked.
  until_queued(turns, 2);
  first.give_up();
  CHECK_FALSE(first.held());
  b.join();
  c.join();
  CHECK(order == std::vector<int>{2, 3});
  CHECK_FALSE(turns.wanted());
  // The turn is free again: taken at once.
  first.hold(turns_deadline());
  CHECK(first.held());
}

TEST_CASE("core turns: two cores hold two ranks at once, and a third waits for one of them") {
  const KeepCpus kept;
  CoreTurns turns(2);
  CoreTurn a(&turns), b(&turns), c(&turns);
  a.hold(turns_deadline());
  b.hold(turns_deadline());
  std::atomic<bool> c_held{false};
  std::thread t([&] {
    c.hold(turns_deadline());
    c_held = true;
  });
  until_queued(turns, 1);
  CHECK_FALSE(c_held);
  b.give_up();
  t.join();
  CHECK(c_held);
  CHECK(c.held());
  CHECK(a.held());
}

TEST_CASE("core turns: a wait past its deadline fails and leaves the queue, and an abort wakes every waiter") {
  const KeepCpus kept;
  CoreTurns turns(1);
  CoreTurn holder(&turns), late(&turns);
  holder.hold(turns_deadline());
  CHECK_THROWS_AS(late.hold(Clock::now() + std::chrono::milliseconds(5)), RecvTimeout);
  CHECK_FALSE(late.held());
  CHECK_FALSE(turns.wanted());

  CoreTurn waiting(&turns);
  bool aborted = false;
  std::thread t([&] {
    try {
      waiting.hold(turns_deadline());
    } catch (const RunAborted&) {
      aborted = true;
    }
  });
  until_queued(turns, 1);
  turns.abort();
  t.join();
  CHECK(aborted);
  CHECK_FALSE(waiting.held());
  CoreTurn after(&turns);
  CHECK_THROWS_AS(after.hold(turns_deadline()), RunAborted);
}

TEST_CASE("core turns: a receiver asleep on a tensor is queued by its send and wakes holding a turn") {
  const KeepCpus kept;
  OneCoreTransport one;
  CoreTurns& turns = one.turns;
  ThreadTransport& transport = one.transport;
  CoreTurn sender(&turns), receiver(&turns);
  sender.hold(turns_deadline());
  const MessageKey key{0, Op::SendF, 0, 0};
  Message got;
  std::thread r([&] { got = transport.recv_taking_turns(1, 0, key, turns_deadline(), receiver, one.stop); });
  // The receiver holds no turn and sleeps on its mailbox; the send queues it behind the sender.
  while (turns.asleep() != 1) std::this_thread::yield();
  CHECK_FALSE(turns.wanted());
  transport.send(0, 1, key, Message{std::make_shared<HostTensor>(Mat::Constant(1, 3, 2.0f)), Clock::now(), 7});
  CHECK(turns.wanted());
  sender.give_up();
  r.join();
  CHECK(receiver.held());
  CHECK(got.flow_id == 7);
  CHECK_FALSE(turns.wanted());
}

TEST_CASE("core turns: a holder waiting for a tensor keeps its turn, and gives it up to a rank that wants one") {
  const KeepCpus kept;
  OneCoreTransport one;
  CoreTurns& turns = one.turns;
  ThreadTransport& transport = one.transport;
  CoreTurn waiter(&turns), other(&turns);
  waiter.hold(turns_deadline());
  const MessageKey key{0, Op::SendB, 1, 0};
  std::atomic<bool> other_held{false};
  Message got;
  std::thread w([&] {
    got = transport.recv_taking_turns(0, 1, key, turns_deadline(), waiter, one.stop);
    waiter.hold(turns_deadline());  // as a rank does before it computes
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK_FALSE(turns.wanted());  // it spins on its turn: nobody else asked
  // Another rank asks for the only turn: the spinning holder hands it over, and sleeps until the tensor comes.
  std::thread o([&] {
    other.hold(turns_deadline());
    other_held = true;
    transport.send(1, 0, key, Message{nullptr, Clock::now(), 11});
    other.give_up();
  });
  o.join();
  w.join();
  CHECK(other_held);
  CHECK(got.flow_id == 11);
  CHECK(waiter.held());
}

TEST_CASE("a pipeline in turns on one core trains as the OS-scheduled one does, never two ranks computing at once") {
  const Model model = test::tiny_llama(5);
  const Schedule schedule = make_schedule({"1f1b", 4, 8});
  const auto run = [&](int cores) {
    CpuBackendConfig config;
    config.seed = 3;
    config.optimizer = OptimizerConfig{OptimizerKind::Adam, 1e-2};
    CpuBackend backend(model, {{0, 1}, {2, 3}, {4, 5}, {6, 6}}, config);
    RunOptions options;
    options.iterations = 2;
    options.timeout_s = 20;
    options.cores = cores;
    RunResult result = run_schedule(schedule, backend, options);
    return std::make_pair(backend.losses(), result);
  };
  const auto [free_losses, free_result] = run(0);
  for (int cores : {1, 2}) {
    const auto [losses, result] = run(cores);
    INFO("cores " << cores);
    CHECK(losses == free_losses);
    // Compute slices of every rank, as measured: at no moment more of them than cores.
    for (const IterationRecord& it : result.iterations) {
      std::vector<std::pair<double, int>> edges;
      for (const RankIteration& r : it.ranks)
        for (const SimEvent& e : r.events)
          if (e.lane == Lane::Compute) {
            edges.emplace_back(e.start_s, 1);
            edges.emplace_back(e.end_s, -1);
          }
      std::sort(edges.begin(), edges.end());  // an end before a start at the same instant
      int computing = 0, most = 0;
      for (const auto& [t, d] : edges) most = std::max(most, computing += d);
      CHECK(most <= cores);
    }
  }
}
