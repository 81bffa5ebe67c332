// The runtime with several ranks per process (the cuda backend's processes: a thread per GPU), on the CPU
// backend so that it runs without a GPU: two loopback "processes" (threads) of two ranks each train as
// four rank threads in one process do, process 0 gathers every rank's records, and a failing rank ends both
// processes, named once.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <optional>
#include <thread>

#include "../executor/executor_test_util.hpp"
#include "core/error.hpp"
#include "executor/cpu_backend.hpp"
#include "executor/process_group.hpp"
#include "executor/runtime.hpp"
#include "schedules/generators.hpp"

using namespace pw;

namespace {

// What the processes share: one mailbox set for every rank, a barrier, gather slots, the first failure.
class Hub {
 public:
  Hub(int processes, int ranks) : n_(processes), wires_(ranks), slots_(static_cast<size_t>(processes)) {}
  ThreadTransport& wires() { return wires_; }
  int size() const { return n_; }

  void announce(int who, const std::string& message) {
    {
      std::lock_guard lock(mutex_);
      if (!failure_) {
        failure_ = message;
        failed_by_ = who;
      }
    }
    changed_.notify_all();
    wires_.abort();
  }
  void check(int me) {
    std::lock_guard lock(mutex_);
    if (failure_ && failed_by_ != me) throw PeerFailed(*failure_);
  }
  Clock::time_point meet(int me, Clock::time_point deadline) {
    check(me);
    std::unique_lock lock(mutex_);
    const long generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return Clock::now();
    }
    if (!changed_.wait_until(lock, deadline, [&] { return failure_ || generation_ != generation; })) throw RecvTimeout();
    lock.unlock();
    check(me);
    return Clock::now();
  }
  std::vector<std::vector<std::byte>> gather(int me, std::vector<std::byte> bytes, Clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    slots_[static_cast<size_t>(me)] = std::move(bytes);
    ++gathered_;
    changed_.notify_all();
    if (me != 0) return {};
    if (!changed_.wait_until(lock, deadline, [&] { return gathered_ == n_; })) throw RecvTimeout();
    return slots_;
  }

 private:
  int n_;
  ThreadTransport wires_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  long generation_ = 0;
  std::optional<std::string> failure_;
  int failed_by_ = -1;
  std::vector<std::vector<std::byte>> slots_;
  int gathered_ = 0;
};

// Tensors between every rank of every process (as NCCL carries them), failures announced through the hub.
class HubTransport : public Transport {
 public:
  HubTransport(Hub& hub, int me) : hub_(hub), me_(me) {}
  void send(int src, int dst, const MessageKey& key, Message message) override {
    hub_.wires().send(src, dst, key, std::move(message));
  }
  Message recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) override {
    try {
      return hub_.wires().recv(dst, src, key, deadline);
    } catch (const RunAborted&) {
      hub_.check(me_);
      throw;
    }
  }
  void abort() override { hub_.wires().abort(); }
  void announce_failure(const std::string& message) override { hub_.announce(me_, message); }

 private:
  Hub& hub_;
  int me_;
};

class HubGroup : public ProcessGroup {
 public:
  HubGroup(Hub& hub, int me) : hub_(hub), me_(me) {}
  int rank() const override { return me_; }
  int size() const override { return hub_.size(); }
  std::unique_ptr<Transport> transport_for(const Backend&) override { return std::make_unique<HubTransport>(hub_, me_); }
  Clock::time_point barrier(Clock::time_point deadline) override { return hub_.meet(me_, deadline); }
  std::vector<std::vector<std::byte>> gather(std::vector<std::byte> bytes, Clock::time_point deadline) override {
    return hub_.gather(me_, std::move(bytes), deadline);
  }

 private:
  Hub& hub_;
  int me_;
};

struct Outcome {
  std::optional<RunResult> result;
  std::string error;
  bool elsewhere = false;
  std::vector<double> losses;
};

// Two processes of two ranks each: process k holds ranks 2k and 2k + 1.
std::vector<Outcome> run_two_processes(const Model& model, const std::vector<LayerRange>& ranges,
                                       const Schedule& schedule, const RunOptions& options) {
  Hub hub(2, schedule.num_ranks());
  std::vector<Outcome> out(2);
  {
    std::vector<std::jthread> processes;
    for (int k = 0; k < 2; ++k)
      processes.emplace_back([&, k] {
        Outcome& o = out[static_cast<size_t>(k)];
        CpuBackend backend(model, ranges, CpuBackendConfig{});
        HubGroup group(hub, k);
        HubTransport transport(hub, k);
        try {
          o.result = run_schedule(schedule, backend, options, group, transport, {2 * k, 2 * k + 1});
        } catch (const RunFailedElsewhere& e) {
          o.error = e.what();
          o.elsewhere = true;
        } catch (const Error& e) {
          o.error = e.what();
        }
        o.losses = backend.losses();
      });
  }
  return out;
}

Schedule schedule_of(const std::string& name) {
  ScheduleSpec spec;
  spec.name = name;
  spec.ranks = 4;
  spec.microbatches = 8;
  return make_schedule(spec);
}

const std::vector<LayerRange> kRanges = {{0, 1}, {2, 2}, {3, 3}, {4, 5}};  // tiny_llama(4): 6 layers

}  // namespace

TEST_CASE("two processes of two rank threads each train as four rank threads do", "[cuda][host]") {
  const Model model = test::tiny_llama(4);
  for (const std::string name : {"1f1b", "zb-h1"}) {
    INFO(name);
    const Schedule s = schedule_of(name);
    RunOptions options;
    options.warmup = 1;
    options.iterations = 2;
    options.timeout_s = 30;
    CpuBackend threads_backend(model, kRanges, CpuBackendConfig{});
    const RunResult threads = run_schedule(s, threads_backend, options);
    const std::vector<Outcome> processes = run_two_processes(model, kRanges, s, options);
    for (const Outcome& o : processes) {
      INFO(o.error);
      REQUIRE(o.result);
    }
    // The process holding the last stage has the losses: bit for bit the threads run's (same seed, same order).
    CHECK(processes[0].losses.empty());
    CHECK(processes[1].losses == threads_backend.losses());
    // Process 0 has every rank's records; the activation bytes follow the schedule, not the timing.
    const RunResult& gathered = *processes[0].result;
    REQUIRE(gathered.iterations.size() == 3);
    CHECK(gathered.activation_peak_bytes == threads.activation_peak_bytes);
    for (const IterationRecord& it : gathered.iterations) {
      CHECK(it.step_time_s > 0);
      for (const RankIteration& r : it.ranks) {
        CHECK(r.busy_s > 0);
        CHECK(r.end_s <= it.step_time_s);
        CHECK_FALSE(r.events.empty());
      }
    }
    // Process 1 keeps its own ranks' records only.
    CHECK(processes[1].result->iterations[1].ranks[0].events.empty());
    CHECK_FALSE(processes[1].result->iterations[1].ranks[3].events.empty());
  }
}

TEST_CASE("a failing rank thread ends both processes at once, its error said by its process alone", "[cuda][host]") {
  const Model model = test::tiny_llama(4);
  RunOptions options;
  options.iterations = 1;
  options.timeout_s = 20;
  options.before_action = [](int rank, int, const Action& a) {
    if (rank == 3 && a == Action{Op::F, 3, 2}) throw std::runtime_error("injected");
  };
  const auto start = Clock::now();
  const std::vector<Outcome> processes = run_two_processes(model, kRanges, schedule_of("1f1b"), options);
  CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 10);  // not the 20 s timeout
  CHECK(processes[1].error == "rank 3 failed at 3F2: injected");
  CHECK_FALSE(processes[1].elsewhere);
  CHECK(processes[0].error == "rank 3 failed at 3F2: injected");
  CHECK(processes[0].elsewhere);
}

TEST_CASE("a process's ranks must be ascending ranks of the schedule", "[cuda][host]") {
  const Model model = test::tiny_llama(4);
  Hub hub(2, 4);
  HubGroup group(hub, 0);
  HubTransport transport(hub, 0);
  CpuBackend backend(model, kRanges, CpuBackendConfig{});
  CHECK_THROWS_WITH(run_schedule(schedule_of("1f1b"), backend, RunOptions{}, group, transport, {1, 0}),
                    "process 0: its ranks must be ascending ranks of the schedule's 4");
  CHECK_THROWS_WITH(run_schedule(schedule_of("1f1b"), backend, RunOptions{}, group, transport, {3, 4}),
                    "process 0: its ranks must be ascending ranks of the schedule's 4");
}
