// The runtime's ranks-as-processes mode without MPI: each "process" is a thread with its own backend and its
// own run_schedule call, joined by a loopback group that carries every tensor as the bytes a process would
// send (append_wire / tensor_from_wire). A process holds one rank, or several as threads (the cuda backend's
// processes, a thread per GPU). What MPI adds (mpirun, pids) is covered by mpi_run_test.cpp.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <optional>
#include <thread>

#include "core/error.hpp"
#include "executor/cpu_backend.hpp"
#include "executor/process_group.hpp"
#include "executor/runtime.hpp"
#include "executor_test_util.hpp"
#include "schedules/generators.hpp"

using namespace pw;
using test::schedule_of;

namespace {

// Bytes in flight.
class WireTensor : public Tensor {
 public:
  explicit WireTensor(std::vector<std::byte> b) : wire(std::move(b)) {}
  double bytes() const override { return static_cast<double>(wire.size()); }
  TensorPtr clone() const override { return std::make_shared<WireTensor>(wire); }
  std::vector<std::byte> wire;
};

// What the processes share: mailboxes, a barrier, gather slots and the first failure announced.
class Hub {
 public:
  // `processes` meet and gather; `ranks` (all of them, over every process) exchange tensors.
  Hub(int processes, int ranks) : n_(processes), wires_(ranks), slots_(static_cast<size_t>(processes)) {}
  explicit Hub(int n) : Hub(n, n) {}

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
  // Another process's failure ends this one's waits, as a notice over MPI would.
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

class LoopbackTransport : public Transport {
 public:
  LoopbackTransport(Hub& hub, int me, const Backend& backend) : hub_(hub), me_(me), backend_(backend) {}
  void send(int src, int dst, const MessageKey& key, Message message) override {
    std::vector<std::byte> wire;
    if (message.tensor) message.tensor->append_wire(wire);
    message.tensor = message.tensor ? std::make_shared<WireTensor>(std::move(wire)) : nullptr;
    hub_.wires().send(src, dst, key, std::move(message));
  }
  Message recv(int dst, int src, const MessageKey& key, Clock::time_point deadline) override {
    Message m;
    try {
      m = hub_.wires().recv(dst, src, key, deadline);
    } catch (const RunAborted&) {
      hub_.check(me_);
      throw;
    }
    if (m.tensor) m.tensor = backend_.tensor_from_wire(static_cast<const WireTensor&>(*m.tensor).wire);
    return m;
  }
  void abort() override { hub_.wires().abort(); }
  void announce_failure(const std::string& message) override { hub_.announce(me_, message); }

 private:
  Hub& hub_;
  int me_;
  const Backend& backend_;
};

class LoopbackGroup : public ProcessGroup {
 public:
  LoopbackGroup(Hub& hub, int me) : hub_(hub), me_(me) {}
  int rank() const override { return me_; }
  int size() const override { return hub_.size(); }
  std::unique_ptr<Transport> transport_for(const Backend& backend) override {
    return std::make_unique<LoopbackTransport>(hub_, me_, backend);
  }
  Clock::time_point barrier(Clock::time_point deadline) override { return hub_.meet(me_, deadline); }
  std::vector<std::vector<std::byte>> gather(std::vector<std::byte> bytes, Clock::time_point deadline) override {
    return hub_.gather(me_, std::move(bytes), deadline);
  }

 private:
  Hub& hub_;
  int me_;
};


struct ProcessOutcome {
  std::optional<RunResult> result;
  std::string error;
  bool elsewhere = false;
  std::vector<double> losses;
};

// Runs `schedule` as loopback processes of `per_process` workers each (process k holds workers k x per_process
// onwards; with options.replicas, worker d ranks + r is replica d's rank r), each with its own CpuBackend
// built from `config` like the others.
std::vector<ProcessOutcome> run_as_processes(const Model& model, const std::vector<LayerRange>& ranges,
                                             const Schedule& schedule, const RunOptions& options, int per_process = 1,
                                             const CpuBackendConfig& config = {}) {
  const int workers = schedule.num_ranks() * options.replicas;
  const int p = workers / per_process;
  Hub hub(p, workers);
  std::vector<ProcessOutcome> out(static_cast<size_t>(p));
  {
    std::vector<std::jthread> processes;
    for (int k = 0; k < p; ++k)
      processes.emplace_back([&, k] {
        ProcessOutcome& o = out[static_cast<size_t>(k)];
        CpuBackend backend(model, ranges, config);
        LoopbackGroup group(hub, k);
        try {
          if (per_process == 1) {
            o.result = run_schedule(schedule, backend, options, group);
          } else {
            std::vector<int> local;
            for (int i = 0; i < per_process; ++i) local.push_back(k * per_process + i);
            LoopbackTransport transport(hub, k, backend);
            o.result = run_schedule(schedule, backend, options, group, transport, local);
          }
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

}  // namespace

TEST_CASE("ranks as processes compute the threads run's losses, and process 0 gathers every rank's records") {
  const Model model = test::tiny_llama(3);
  const std::vector<LayerRange> ranges = {{0, 2}, {3, 3}, {4, 4}};  // embedding + 2 blocks | block | block + head
  for (const std::string name : {"1f1b", "zb-h1", "interleaved"}) {
    INFO(name);
    const Schedule s = schedule_of(name, 3, 6);
    const std::vector<LayerRange> stage_ranges =
        s.num_stages() == 3 ? ranges : std::vector<LayerRange>{{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}};
    const Model m = s.num_stages() == 3 ? model : test::tiny_llama(4);
    RunOptions options;
    options.warmup = 1;
    options.iterations = 2;
    options.timeout_s = 30;
    CpuBackend threads_backend(m, stage_ranges, CpuBackendConfig{});
    const RunResult threads = run_schedule(s, threads_backend, options);

    const std::vector<ProcessOutcome> processes = run_as_processes(m, stage_ranges, s, options);
    for (const ProcessOutcome& o : processes) REQUIRE(o.error.empty());
    // The last stage's process holds the loss; bit for bit the threads run's (same floats, same order).
    const std::vector<double> want = threads_backend.losses();
    REQUIRE(want.size() == 3);
    CHECK(processes.back().losses == want);
    CHECK(processes[0].losses.empty());

    const RunResult& gathered = *processes[0].result;
    REQUIRE(gathered.iterations.size() == 3);
    for (int r = 0; r < 3; ++r) {
      const auto i = static_cast<size_t>(r);
      CHECK(gathered.activation_peak_bytes[i] == threads.activation_peak_bytes[i]);
      for (size_t it = 0; it < 3; ++it) {
        const RankIteration& a = gathered.iterations[it].ranks[i];
        const RankIteration& b = threads.iterations[it].ranks[i];
        REQUIRE(a.events.size() == b.events.size());
        for (size_t k = 0; k < a.events.size(); ++k) CHECK(a.events[k].action == b.events[k].action);
        CHECK(a.activation_peak_bytes == b.activation_peak_bytes);
        CHECK(a.end_s <= gathered.iterations[it].step_time_s);
      }
    }
    // Another process knows its own rank only.
    const RunResult& second = *processes[1].result;
    CHECK(second.iterations[0].ranks[0].events.empty());
    CHECK(!second.iterations[0].ranks[1].events.empty());
  }
}

TEST_CASE("ranks as processes: the failing process reports, the others learn of it and stay quiet") {
  const Model model = test::tiny_llama(2);
  RunOptions options;
  options.timeout_s = 60;
  options.before_action = [](int rank, int, const Action& a) {
    if (rank == 1 && a == Action{Op::F, 1, 2}) throw std::runtime_error("injected failure");
  };
  const auto start = Clock::now();
  const std::vector<ProcessOutcome> o =
      run_as_processes(model, {{0, 1}, {2, 3}}, schedule_of("1f1b", 2, 4), options);
  CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 5);  // woken, not timed out
  CHECK(o[1].error == "rank 1 failed at 1F2: injected failure");
  CHECK(!o[1].elsewhere);
  CHECK(o[0].error == "rank 1 failed at 1F2: injected failure");
  CHECK(o[0].elsewhere);
}

TEST_CASE("ranks as processes need one process per rank") {
  const Model model = test::tiny_llama(2);
  Hub hub(3);
  LoopbackGroup group(hub, 0);
  CpuBackend backend(model, {{0, 1}, {2, 3}}, CpuBackendConfig{});
  try {
    run_schedule(schedule_of("1f1b", 2, 2), backend, RunOptions{}, group);
    FAIL("ran with 3 processes for 2 ranks");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(std::string(e.what()) == "processes: 3 were started for a schedule of 2 ranks; start one process per rank");
  }
}

TEST_CASE("two processes of two rank threads each train as four rank threads do") {
  const Model model = test::tiny_llama(4);
  const std::vector<LayerRange> ranges = {{0, 1}, {2, 2}, {3, 3}, {4, 5}};  // tiny_llama(4): 6 layers
  for (const std::string name : {"1f1b", "zb-h1"}) {
    INFO(name);
    const Schedule s = schedule_of(name, 4, 8);
    RunOptions options;
    options.warmup = 1;
    options.iterations = 2;
    options.timeout_s = 30;
    CpuBackend threads_backend(model, ranges, CpuBackendConfig{});
    const RunResult threads = run_schedule(s, threads_backend, options);
    const std::vector<ProcessOutcome> processes = run_as_processes(model, ranges, s, options, 2);
    for (const ProcessOutcome& o : processes) {
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

TEST_CASE("a failing rank thread ends both processes at once, its error said by its process alone") {
  const Model model = test::tiny_llama(4);
  const std::vector<LayerRange> ranges = {{0, 1}, {2, 2}, {3, 3}, {4, 5}};
  RunOptions options;
  options.iterations = 1;
  options.timeout_s = 20;
  options.before_action = [](int rank, int, const Action& a) {
    if (rank == 3 && a == Action{Op::F, 3, 2}) throw std::runtime_error("injected");
  };
  const auto start = Clock::now();
  const std::vector<ProcessOutcome> processes = run_as_processes(model, ranges, schedule_of("1f1b", 4, 8), options, 2);
  CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 10);  // not the 20 s timeout
  CHECK(processes[1].error == "rank 3 failed at 3F2: injected");
  CHECK_FALSE(processes[1].elsewhere);
  CHECK(processes[0].error == "rank 3 failed at 3F2: injected");
  CHECK(processes[0].elsewhere);
}

TEST_CASE("a process's ranks must be ascending ranks of the schedule") {
  const Model model = test::tiny_llama(4);
  const std::vector<LayerRange> ranges = {{0, 1}, {2, 2}, {3, 3}, {4, 5}};
  Hub hub(2, 4);
  LoopbackGroup group(hub, 0);
  CpuBackend backend(model, ranges, CpuBackendConfig{});
  LoopbackTransport transport(hub, 0, backend);
  CHECK_THROWS_WITH(run_schedule(schedule_of("1f1b", 4, 8), backend, RunOptions{}, group, transport, {1, 0}),
                    "process 0: its ranks must be ascending ranks of the schedule's 4");
  CHECK_THROWS_WITH(run_schedule(schedule_of("1f1b", 4, 8), backend, RunOptions{}, group, transport, {3, 4}),
                    "process 0: its ranks must be ascending ranks of the schedule's 4");
}

TEST_CASE("MoE replicas as processes: the experts' all-to-alls cross as wire bytes, the threads run's losses bit for bit") {
  const Model model = test::tiny_moe(3);
  const std::vector<LayerRange> ranges = {{0, 2}, {3, 4}};
  const Schedule s = schedule_of("1f1b", 2, 4);
  CpuBackendConfig config;
  config.replicas = 2;
  config.ep = 2;
  RunOptions options;
  options.iterations = 2;
  options.timeout_s = 30;
  options.replicas = 2;
  CpuBackend threads_backend(model, ranges, config);
  const RunResult threads = run_schedule(s, threads_backend, options);
  const std::vector<double> want = threads_backend.losses();
  REQUIRE(want.size() == 2);
  CHECK(want[1] < want[0]);

  const std::vector<ProcessOutcome> processes = run_as_processes(model, ranges, s, options, 1, config);
  REQUIRE(processes.size() == 4);
  for (const ProcessOutcome& o : processes) REQUIRE(o.error.empty());
  // Workers 1 and 3 hold the head of replicas 0 and 1: each has its replica's loss, the mean is the run's.
  CHECK(processes[0].losses.empty());
  REQUIRE(processes[1].losses.size() == 2);
  REQUIRE(processes[3].losses.size() == 2);
  for (size_t i = 0; i < 2; ++i) CHECK((processes[1].losses[i] + processes[3].losses[i]) / 2 == Approx(want[i]).epsilon(1e-12));
  const RunResult& gathered = *processes[0].result;
  REQUIRE(gathered.iterations[0].ranks.size() == 4);
  for (size_t w = 0; w < 4; ++w) {
    INFO("worker " << w);
    CHECK(gathered.activation_peak_bytes[w] == threads.activation_peak_bytes[w]);
    CHECK(gathered.iterations[1].ranks[w].events.size() == threads.iterations[1].ranks[w].events.size());
  }
}

TEST_CASE("replicas as processes need one process per rank of each replica") {
  const Model model = test::tiny_llama(3);
  CpuBackendConfig config;
  config.replicas = 2;
  CpuBackend backend(model, {{0, 2}, {3, 4}}, config);
  Hub hub(2);
  LoopbackGroup group(hub, 0);
  RunOptions options;
  options.replicas = 2;
  CHECK_THROWS_WITH(run_schedule(schedule_of("1f1b", 2, 4), backend, options, group),
                    "processes: 2 were started for a schedule of 2 ranks x 2 replicas; start one process per rank of "
                    "each replica");
}
