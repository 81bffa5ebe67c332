#include "executor/runtime.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <time.h>

#include "core/error.hpp"
#include "executor/core_turns.hpp"
#include "executor/record_wire.hpp"
#include "executor/spin_wait.hpp"
#include "executor/stall_watch.hpp"
#include "schedules/generators.hpp"
#include "schedules/validate.hpp"

namespace pw {
namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// CPU time of the calling thread.
double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

Clock::time_point deadline_after(double timeout_s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
}

// Where all ranks meet: returns when the last one arrived. Stoppable, and bounded by a deadline.
class Meeting {
 public:
  virtual ~Meeting() = default;
  virtual Clock::time_point arrive_and_wait(Clock::time_point deadline) = 0;
  virtual void abort() = 0;
};

// The rank threads of this process meet: the last to arrive releases the others, after `last_arrived`
// (which returns the release time) has run without the lock. Waiters spin before they sleep, as receives
// do (executor/spin_wait.hpp), and end at the deadline or when the meeting is aborted.
class ThreadMeeting : public Meeting {
 public:
  explicit ThreadMeeting(int n) : n_(n), spin_(spin_allowed(n)) {}

  Clock::time_point arrive_and_wait(Clock::time_point deadline) override {
    std::unique_lock lock(mutex_);
    if (aborted_) throw RunAborted();
    const unsigned long generation = generation_.load(std::memory_order_relaxed);
    if (++arrived_ == n_) {
      arrived_ = 0;
      lock.unlock();
      const Clock::time_point released = last_arrived(deadline);
      lock.lock();
      released_ = released;
      generation_.fetch_add(1, std::memory_order_release);
      all_.notify_all();
      return released;
    }
    if (spin_) {
      lock.unlock();
      spin_until_changed(generation_, generation);
      lock.lock();
    }
    if (!all_.wait_until(lock, deadline + grace(), [&] { return aborted_ || generation_.load() != generation; }))
      throw RecvTimeout();
    if (aborted_) throw RunAborted();
    return released_;
  }

  void abort() override {
    {
      std::lock_guard lock(mutex_);
      aborted_ = true;
    }
    all_.notify_all();
  }

 protected:
  virtual Clock::time_point last_arrived(Clock::time_point) { return Clock::now(); }
  // How much longer than the deadline the others wait for the last one's release.
  virtual Clock::duration grace() const { return Clock::duration::zero(); }

 private:
  std::mutex mutex_;
  std::condition_variable all_;
  int n_;
  bool spin_;
  int arrived_ = 0;
  std::atomic<unsigned long> generation_{0};
  bool aborted_ = false;
  Clock::time_point released_{};
};

// Ranks as processes, each holding `local` ranks as threads: the local ranks meet here first, and the last
// of them to arrive meets the other processes through the group's barrier (whose waits end on their own once
// the run stops) and then releases the others. With one rank per process this is the group's barrier alone.
class ProcessMeeting : public ThreadMeeting {
 public:
  ProcessMeeting(ProcessGroup& group, int local) : ThreadMeeting(local), group_(group) {}

 protected:
  // A failure here stops the run (the rank fails), which aborts this meeting for the others.
  Clock::time_point last_arrived(Clock::time_point deadline) override { return group_.barrier(deadline); }
  // The rank meeting the group reports its failure or timeout (it stops the run, which ends this wait);
  // waiting a little longer than it keeps its reason the run's.
  Clock::duration grace() const override { return std::chrono::seconds(2); }

 private:
  ProcessGroup& group_;
};

// A process's ranks' records in one message: their count, then each rank's (rank_records_to_wire) after its
// length.
std::vector<std::byte> process_records_to_wire(const std::vector<int>& local, const RunResult& result) {
  std::vector<std::byte> out;
  // Appended by resize and memcpy: GCC 12 misreads vector::insert of a few bytes as an overflow.
  const auto put = [&out](const void* data, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    if (n > 0) std::memcpy(out.data() + at, data, n);
  };
  const std::uint64_t count = local.size();
  put(&count, sizeof count);
  for (int r : local) {
    const std::vector<std::byte> one =
        rank_records_to_wire(r, result.iterations, result.activation_peak_bytes[static_cast<size_t>(r)]);
    const std::uint64_t n = one.size();
    put(&n, sizeof n);
    put(one.data(), one.size());
  }
  return out;
}

void process_records_from_wire(std::span<const std::byte> wire, RunResult& result) {
  size_t at = 0;
  const auto get = [&]() {
    std::uint64_t v = 0;
    if (wire.size() - at < sizeof v) throw_runtime("gathered records: a message of {} bytes ends early", wire.size());
    std::memcpy(&v, wire.data() + at, sizeof v);
    at += sizeof v;
    return v;
  };
  const std::uint64_t ranks = get();
  for (std::uint64_t i = 0; i < ranks; ++i) {
    const std::uint64_t n = get();
    if (wire.size() - at < n) throw_runtime("gathered records: a message of {} bytes ends early", wire.size());
    const RankRecordsHeader h = rank_records_from_wire(wire.subspan(at, n), result.iterations);
    result.activation_peak_bytes[static_cast<size_t>(h.rank)] = h.peak_bytes;
    at += n;
  }
}

using Key = std::pair<int, int>;  // (stage, micro-batch)

struct Shared {
  Shared(const Schedule& s, Backend& b, const RunOptions& o, Transport& t, Meeting& m, StallWatch& w, CoreTurns* c)
      : schedule(s), backend(b), options(o), transport(t), barrier(m), watch(w), turns(c) {}

  const Schedule& schedule;
  Backend& backend;
  const RunOptions& options;
  Transport& transport;
  Meeting& barrier;
  StallWatch& watch;
  CoreTurns* turns;  // null: the OS shares the cores
  ThreadTransport* threads = nullptr;  // with turns: the transport, this process's thread transport
  std::atomic<bool> stop{false};
  std::mutex failure_mutex;
  std::optional<std::string> failure;
  bool failed_elsewhere = false;  // another process's failure, which that process reports

  // "rank 2", or with replicas "rank 2 of replica 1".
  std::string name_of(int worker) const {
    const int ranks = schedule.num_ranks();
    if (options.replicas == 1) return fmt::format("rank {}", worker);
    return fmt::format("rank {} of replica {}", worker % ranks, worker / ranks);
  }

  void fail(int worker, const std::string& where, const std::string& what) {
    fail_with(fmt::format("{} failed at {}: {}", name_of(worker), where, what));
  }

  void fail_with(const std::string& message, bool elsewhere = false) {
    bool first = false;
    {
      std::lock_guard lock(failure_mutex);
      if (!failure) {
        failure = message;
        failed_elsewhere = elsewhere;
        first = true;
      }
    }
    if (first && !elsewhere) transport.announce_failure(message);
    stop_all();
  }

  // Wakes every rank from its waits; each then ends quietly (RunAborted).
  void stop_all() {
    stop = true;
    transport.abort();
    barrier.abort();
    if (turns) turns->abort();
    watch.stopped();
  }
};

template <typename Map>
TensorPtr take(Map& map, const Key& key, const char* what, const Action& a) {
  auto it = map.find(key);
  if (it == map.end())
    throw_runtime("{} of stage {} micro-batch {} is not here; the schedule runs {} before it arrives", what, key.first,
                  key.second, to_text(a));
  TensorPtr t = std::move(it->second);
  map.erase(it);
  return t;
}

// One worker: a pipeline rank of one replica. It runs the rank's action list and, for its backend, the
// exchanges with the same rank of the other replicas (Collectives).
class RankRunner : public Collectives {
 public:
  RankRunner(Shared& shared, StallWatch& watch, int slot, int worker, int total_iterations,
             std::vector<IterationRecord>& records)
      : sh_(shared),
        watch_(watch),
        slot_(slot),
        worker_(worker),
        rank_(worker % shared.schedule.num_ranks()),
        replica_(worker / shared.schedule.num_ranks()),
        total_(total_iterations),
        records_(records) {}

  std::vector<TensorPtr> all_to_all(const std::vector<int>& group, std::vector<TensorPtr> parts) override {
    if (parts.size() != group.size())
      throw_runtime("all-to-all: {} parts for a group of {} replicas", parts.size(), group.size());
    const MessageKey key{iteration_, Op::SendF, current_.stage, current_.microbatch, ++exchanges_};
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < group.size(); ++i)
      if (group[i] != replica_) sh_.transport.send(worker_, worker_of(group[i], rank_), key, Message{parts[i], now, -1});
    std::vector<TensorPtr> got(group.size());
    const std::string where = watch_.where(slot_);  // an action, or the optimizer step's reduction
    for (size_t i = 0; i < group.size(); ++i) {
      if (group[i] == replica_) {
        got[i] = std::move(parts[i]);
        continue;
      }
      got[i] = wait_for(worker_of(group[i], rank_), key, fmt::format("exchange {} at {}", key.exchange, where), where)
                   .tensor;
    }
    hold_turn();  // the waits above may have given it up; the action computes on
    return got;
  }

  // Receives the message `key` from worker `src`, the wait shown as `where` and a timeout naming `what`.
  Message wait_for(int src, const MessageKey& key, const std::string& what, const std::string& where) {
    timeout_reason_ =
        fmt::format("no message from {} ({}) within {:g} s", sh_.name_of(src), what, sh_.options.timeout_s);
    const std::string before = watch_.where(slot_);
    watch_.working(slot_, where);
    watch_.waiting(slot_);
    Message m;
    if (sh_.turns) {
      m = sh_.threads->recv_taking_turns(worker_, src, key, deadline_after(sh_.options.timeout_s), turn_, sh_.stop);
    } else {
      m = sh_.transport.recv(worker_, src, key, deadline_after(sh_.options.timeout_s));
    }
    watch_.working(slot_, before);
    return m;
  }

  double run_peak() const { return memory_.peak(); }

  void run() {
    run_until_done_or_failed();
    turn_.give_up();
    watch_.done(slot_);
  }

 private:
  void run_until_done_or_failed() {
    watch_.working(slot_, "the start");
    try {
      RankSetup setup;
      setup.rank = rank_;
      setup.replica = replica_;
      setup.replicas = sh_.options.replicas;
      if (setup.replicas > 1) setup.collectives = this;
      for (int s = 0; s < sh_.schedule.num_stages(); ++s)
        if (sh_.schedule.placement.rank_of(s) == rank_) setup.stages.push_back(s);
      setup.num_stages = sh_.schedule.num_stages();
      setup.memory = &memory_;
      setup.stop = &sh_.stop;
      compute_ = sh_.backend.make_rank(setup);
      for (int it = 0; it < total_; ++it) iteration(it);
    } catch (const PeerFailed& e) {
      sh_.fail_with(e.message, /*elsewhere=*/true);
    } catch (const RunAborted&) {
      // Another rank failed first; its error is the run's.
    } catch (const RecvTimeout&) {
      sh_.fail(worker_, watch_.where(slot_), timeout_reason_);
    } catch (const PeerLost& e) {
      sh_.fail_with(fmt::format("{} failed: its process ({}) ended while {} waited at {}", sh_.name_of(e.rank), e.process,
                                sh_.name_of(worker_), watch_.where(slot_)));
    } catch (const std::exception& e) {
      sh_.fail(worker_, watch_.where(slot_), e.what());
    }
  }

  void iteration(int it) {
    const Clock::time_point origin = meet("the start of an iteration");
    origin_ = origin;
    memory_.begin_iteration(origin);
    RankIteration& rec = records_[static_cast<size_t>(it)].ranks[static_cast<size_t>(worker_)];
    iteration_ = it;
    exchanges_ = 0;
    current_ = Action{};
    compute_->begin_iteration(it, sh_.schedule.microbatches);
    for (const Action& a : sh_.schedule.ranks[static_cast<size_t>(rank_)]) {
      watch_.working(slot_, to_text(a));
      current_ = a;
      if (sh_.stop) throw RunAborted();
      if (sh_.options.before_action) sh_.options.before_action(rank_, it, a);
      step(a, it, rec);
    }
    compute_->end_iteration();
    if (!fwd_in_.empty() || !grad_in_.empty() || !fwd_out_.empty() || !grad_out_.empty() || !posted_.empty())
      throw_runtime("the iteration ended with tensors no action consumed");
    meet("the end of the iteration");
    watch_.working(slot_, "the optimizer step");
    if (sh_.options.optimizer_step) hold_turn();
    const double step_start = since_origin(Clock::now());
    if (sh_.options.optimizer_step) compute_->optimizer_step();
    rec.end_s = since_origin(Clock::now());
    if (sh_.options.optimizer_step) rec.events.push_back(optimizer_step_event(worker_, step_start, rec.end_s));
    rec.activation_peak_bytes = memory_.iteration_peak();
    rec.memory = memory_.samples();
  }

  // Waits for every rank at the barrier; returns when the last one arrived.
  Clock::time_point meet(const char* where) {
    watch_.working(slot_, where);
    watch_.waiting(slot_);
    turn_.give_up();
    timeout_reason_ = fmt::format("the other ranks did not arrive within {:g} s", sh_.options.timeout_s);
    return sh_.barrier.arrive_and_wait(deadline_after(sh_.options.timeout_s));
  }

  double since_origin(Clock::time_point t) const { return seconds_between(origin_, t); }

  int rank_of(int stage) const { return sh_.schedule.placement.rank_of(stage); }
  int worker_of(int replica, int rank) const { return replica * sh_.schedule.num_ranks() + rank; }
  bool has_stage(int stage) const { return stage >= 0 && stage < sh_.schedule.num_stages(); }

  // Where a forward output goes: the next stage's input here, or the outbox for its SEND_F.
  void route_forward(int stage, int mb, TensorPtr out) {
    if (!has_stage(stage + 1)) return;  // the last stage's output is its loss
    if (rank_of(stage + 1) == rank_)
      fwd_in_[{stage + 1, mb}] = std::move(out);
    else
      fwd_out_[{stage, mb}] = std::move(out);
  }
  void route_backward(int stage, int mb, TensorPtr grad) {
    if (!has_stage(stage - 1)) return;
    if (rank_of(stage - 1) == rank_)
      grad_in_[{stage - 1, mb}] = std::move(grad);
    else
      grad_out_[{stage, mb}] = std::move(grad);
  }
  TensorPtr forward_input(int stage, int mb, const Action& a) {
    return stage == 0 ? nullptr : take(fwd_in_, {stage, mb}, "the forward input", a);
  }
  TensorPtr backward_input(int stage, int mb, const Action& a) {
    return has_stage(stage + 1) ? take(grad_in_, {stage, mb}, "the output gradient", a) : nullptr;
  }

  long flow_id(bool forward, int sending_stage, int mb) const {
    const long stages = sh_.schedule.num_stages(), m = sh_.schedule.microbatches;
    return (forward ? 0 : stages * m) + sending_stage * m + mb;
  }

  // A receive is posted where it stands in the list and waited for by the action that consumes it, as
  // PyTorch's pipelining runtime runs its lists (and the simulator times them).
  struct Posted {
    Action recv;
    Clock::time_point at{};
  };
  using PostedKey = std::tuple<bool, int, int>;  // (forward, consuming stage, micro-batch)

  // Waits for the posted receives bringing `a`'s inputs and hands them over as if they had arrived here.
  void await_inputs(const Action& a, RankIteration& rec) {
    if (a.op == Op::F || a.op == Op::FB) await(true, a.stage, a.microbatch, rec);
    if (a.op == Op::B || a.op == Op::BW) await(false, a.stage, a.microbatch, rec);
    if (a.op == Op::FB) await(false, a.stage2, a.microbatch2, rec);
  }

  void await(bool fwd, int stage, int mb, RankIteration& rec) {
    auto it = posted_.find({fwd, stage, mb});
    if (it == posted_.end()) return;
    const Posted p = it->second;
    posted_.erase(it);
    const int from_stage = fwd ? stage - 1 : stage + 1;
    const Action send{fwd ? Op::SendF : Op::SendB, from_stage, mb};
    // A wait past the timeout is the receive's.
    Message m = wait_for(worker_of(replica_, rank_of(from_stage)), MessageKey{iteration_, send.op, from_stage, mb},
                         to_text(send), to_text(p.recv));
    SimEvent e;
    e.rank = worker_;
    e.action = p.recv;
    e.lane = Lane::Recv;
    e.bytes = m.tensor ? m.tensor->bytes() : 0;
    e.flow_id = m.flow_id;
    // As the simulator counts it: from when both the receive was posted and the data was sent.
    e.start_s = since_origin(std::max(p.at, m.sent));
    e.end_s = std::max(e.start_s, since_origin(Clock::now()));
    rec.events.push_back(e);
    (fwd ? fwd_in_ : grad_in_)[{stage, mb}] = std::move(m.tensor);
  }

  // Takes a core's turn (RunOptions::cores) before computing; a wait for one past the timeout is the rank's.
  void hold_turn() {
    if (!sh_.turns || turn_.held()) return;  // every action passes here: no work without turns
    timeout_reason_ = fmt::format("no core was free within {:g} s", sh_.options.timeout_s);
    turn_.hold(deadline_after(sh_.options.timeout_s));
  }

  void step(const Action& a, int it, RankIteration& rec) {
    if (is_compute(a.op)) {
      await_inputs(a, rec);
      hold_turn();
    }
    const double cpu_start = is_compute(a.op) ? thread_cpu_s() : 0;
    const Clock::time_point start = Clock::now();
    SimEvent e;
    e.rank = worker_;
    e.action = a;
    switch (a.op) {
      case Op::F:
        route_forward(a.stage, a.microbatch, compute_->forward(a.stage, a.microbatch, forward_input(a.stage, a.microbatch, a)));
        break;
      case Op::B:
        route_backward(a.stage, a.microbatch,
                       compute_->backward_input(a.stage, a.microbatch, backward_input(a.stage, a.microbatch, a)));
        break;
      case Op::W: compute_->backward_weight(a.stage, a.microbatch); break;
      case Op::BW:
        route_backward(a.stage, a.microbatch,
                       compute_->backward(a.stage, a.microbatch, backward_input(a.stage, a.microbatch, a)));
        break;
      case Op::FB: {
        TensorPtr in = forward_input(a.stage, a.microbatch, a);
        TensorPtr grad = backward_input(a.stage2, a.microbatch2, a);
        RankCompute::FbResult r = compute_->forward_backward(a, std::move(in), std::move(grad));
        route_forward(a.stage, a.microbatch, std::move(r.output));
        route_backward(a.stage2, a.microbatch2, std::move(r.input_grad));
        break;
      }
      case Op::SendF:
      case Op::SendB: {
        const bool fwd = a.op == Op::SendF;
        TensorPtr t = take(fwd ? fwd_out_ : grad_out_, {a.stage, a.microbatch}, fwd ? "the forward output" : "the input gradient", a);
        e.lane = Lane::Send;
        e.bytes = t ? t->bytes() : 0;
        e.flow_id = flow_id(fwd, a.stage, a.microbatch);
        sh_.transport.send(worker_, worker_of(replica_, rank_of(fwd ? a.stage + 1 : a.stage - 1)),
                           MessageKey{it, a.op, a.stage, a.microbatch},
                           Message{std::move(t), start, e.flow_id});
        break;
      }
      case Op::RecvF:
      case Op::RecvB: {
        posted_[{a.op == Op::RecvF, a.stage, a.microbatch}] = Posted{a, start};
        return;  // its event is recorded when the consuming action has waited for it
      }
    }
    const Clock::time_point end = Clock::now();
    e.start_s = since_origin(start);
    e.end_s = std::max(e.start_s, since_origin(end));
    if (is_compute(a.op)) {
      rec.busy_s += e.end_s - e.start_s;
      rec.busy_cpu_s += thread_cpu_s() - cpu_start;
    }
    rec.events.push_back(e);
  }

  Shared& sh_;
  StallWatch& watch_;
  int slot_;  // the worker's place among this process's workers
  int worker_;
  int rank_;  // in the pipeline
  int replica_;
  int total_;
  int iteration_ = 0;
  int exchanges_ = 0;  // collective exchanges so far in this iteration
  CoreTurn turn_{sh_.turns};  // held while computing, given up before every wait that may sleep
  Action current_;     // the action running, which names the exchanges made in it
  std::vector<IterationRecord>& records_;
  std::unique_ptr<RankCompute> compute_;
  MemoryTracker memory_;
  Clock::time_point origin_{};
  std::string timeout_reason_;
  std::map<Key, TensorPtr> fwd_in_, grad_in_;    // inputs waiting for their F / B, by the consuming stage
  std::map<Key, TensorPtr> fwd_out_, grad_out_;  // outputs waiting for their SEND, by the producing stage
  std::map<PostedKey, Posted> posted_;            // receives posted and not yet waited for
};

}  // namespace

void check_runs_one_copy(const std::string& name, int copies) {
  check_one_copy("--schedule", name, copies, "and the executor holds one copy of each stage's layers on a rank", "run");
}

namespace {

// Options and schedule checked before anything runs; returns the lowered schedule.
Schedule checked_schedule(const Schedule& schedule, const RunOptions& options) {
  check_runs_one_copy(schedule.name, schedule.copies);
  if (options.iterations < 1) throw_bad_input("--iterations: must be at least 1, got {}", options.iterations);
  if (options.warmup < 0) throw_bad_input("--warmup: must be 0 or more, got {}", options.warmup);
  if (options.replicas < 1) throw_bad_input("--dp: must be at least 1, got {}", options.replicas);
  check_timeout(options.timeout_s);
  Schedule lowered = schedule.lowered ? schedule : lower(schedule);
  validate(lowered);
  return lowered;
}

RunResult empty_result(const RunOptions& options, int ranks) {
  const int total = options.warmup + options.iterations;
  RunResult result;
  result.iterations.resize(static_cast<size_t>(total));
  for (int it = 0; it < total; ++it) {
    result.iterations[static_cast<size_t>(it)].iteration = it;
    result.iterations[static_cast<size_t>(it)].warmup = it < options.warmup;
    result.iterations[static_cast<size_t>(it)].ranks.resize(static_cast<size_t>(ranks));
  }
  result.activation_peak_bytes.assign(static_cast<size_t>(ranks), 0.0);
  return result;
}

// What the rank threads use besides the caller's backend (and transport, when given), owned together: a
// thread given up as stalled holds it and keeps it alive after the run has ended without that thread.
struct RankThreads {
  // `transport` null: a thread transport of this process's own.
  RankThreads(Schedule lowered, const RunOptions& o, Backend& backend, Transport* transport,
              std::unique_ptr<Meeting> meeting_of_ranks, std::vector<int> local_ranks)
      : schedule(std::move(lowered)),
        options(o),
        own_transport(transport ? nullptr : std::make_unique<ThreadTransport>(schedule.num_ranks() * o.replicas)),
        meeting(std::move(meeting_of_ranks)),
        local(std::move(local_ranks)),
        result(empty_result(options, schedule.num_ranks() * o.replicas)),
        watch(static_cast<int>(local.size()), options.timeout_s),
        turns(!transport && options.cores > 0 && local.size() > static_cast<size_t>(options.cores)
                  ? std::make_unique<CoreTurns>(options.cores)
                  : nullptr),
        shared(schedule, backend, options, transport ? *transport : *own_transport, *meeting, watch, turns.get()) {
    if (turns) {
      own_transport->take_turns(turns.get());
      shared.threads = own_transport.get();
    }
    const int total = options.warmup + options.iterations;
    for (size_t i = 0; i < local.size(); ++i)
      runners.push_back(std::make_unique<RankRunner>(shared, watch, static_cast<int>(i), local[i], total, result.iterations));
  }

  Schedule schedule;
  RunOptions options;
  std::unique_ptr<ThreadTransport> own_transport;
  std::unique_ptr<Meeting> meeting;
  std::vector<int> local;  // the workers run here, one thread each
  RunResult result;
  StallWatch watch;
  std::unique_ptr<CoreTurns> turns;  // RunOptions::cores, where the ranks here outnumber them
  Shared shared;
  std::vector<std::unique_ptr<RankRunner>> runners;
};

struct RanksOutcome {
  std::optional<std::string> failure;
  bool failed_elsewhere = false;  // another process's failure, which that process reports
  std::vector<StalledRank> stalled;  // given up (give_up_stalled only), by slot
};

// Runs the ranks as threads into `state->result`. `give_up_stalled`: a rank that stalls (StallWatch) stops
// the run, and its thread is left running, detached; otherwise every thread is joined (ranks as
// processes: the other processes' timeouts end the job, and the launcher a stalled process).
RanksOutcome run_ranks(const std::shared_ptr<RankThreads>& state, bool give_up_stalled) {
  std::vector<std::thread> threads;
  try {
    for (auto& runner : state->runners) threads.emplace_back([state, r = runner.get()] { r->run(); });
  } catch (...) {
    state->shared.stop_all();
    for (std::thread& t : threads) t.join();
    throw;
  }
  RanksOutcome out;
  for (StallWatch::Report r; give_up_stalled && (r = state->watch.wait()).event != StallWatch::Event::AllDone;) {
    if (r.event == StallWatch::Event::GivenUp) {
      out.stalled.insert(out.stalled.end(), r.ranks.begin(), r.ranks.end());
      continue;
    }
    const StalledRank& first = r.ranks.front();
    state->shared.fail(state->local[static_cast<size_t>(first.slot)], first.where,
                       fmt::format("it took longer than the {:g} s timeout", state->options.timeout_s));
  }
  for (size_t i = 0; i < threads.size(); ++i) {
    const bool given_up = std::any_of(out.stalled.begin(), out.stalled.end(),
                                      [i](const StalledRank& s) { return s.slot == static_cast<int>(i); });
    if (given_up)
      threads[i].detach();
    else
      threads[i].join();
  }
  if (!out.stalled.empty()) return out;
  for (size_t i = 0; i < state->local.size(); ++i)
    state->result.activation_peak_bytes[static_cast<size_t>(state->local[i])] = state->runners[i]->run_peak();
  out.failed_elsewhere = state->shared.failed_elsewhere;
  out.failure = state->shared.failure;
  return out;
}

// "rank 0 stalled at 0F0: it did not return within 1 s; the run ended without it", every stalled rank named
// ("rank 0 stalled at 0F0 and rank 2 at 2B1: they did ...").
std::string stall_text(std::vector<StalledRank> stalled, const Shared& shared, const std::vector<int>& local,
                       double timeout_s) {
  std::sort(stalled.begin(), stalled.end(), [](const StalledRank& a, const StalledRank& b) { return a.slot < b.slot; });
  std::string ranks;
  for (size_t i = 0; i < stalled.size(); ++i) {
    const char* before = i == 0 ? "" : i + 1 == stalled.size() ? " and " : ", ";
    ranks += fmt::format("{}{} {}{}{}", before, shared.name_of(local[static_cast<size_t>(stalled[i].slot)]),
                         i == 0 ? "stalled at " : "at ",
                         stalled[i].where, stalled[i].waiting ? " (in a wait past its deadline)" : "");
  }
  const bool one = stalled.size() == 1;
  return fmt::format("{}: {} not return within {:g} s; the run ended without {}", ranks, one ? "it did" : "they did",
                     timeout_s, one ? "it" : "them");
}

void set_step_times(RunResult& result) {
  for (IterationRecord& rec : result.iterations)
    for (const RankIteration& r : rec.ranks) rec.step_time_s = std::max(rec.step_time_s, r.end_s);
}

}  // namespace

void check_timeout(double timeout_s) {
  if (!(timeout_s >= kMinTimeoutS && timeout_s <= kMaxTimeoutS))
    throw_bad_input("--timeout: must be a number of seconds from {:g} to {:g} (a day), got {:g}", kMinTimeoutS,
                    kMaxTimeoutS, timeout_s);
}

RunResult run_schedule(const Schedule& schedule, Backend& backend, const RunOptions& options, Transport* transport) {
  Schedule lowered = checked_schedule(schedule, options);
  const int workers = lowered.num_ranks() * options.replicas;
  std::vector<int> all(static_cast<size_t>(workers));
  for (int w = 0; w < workers; ++w) all[static_cast<size_t>(w)] = w;
  auto state = std::make_shared<RankThreads>(std::move(lowered), options, backend, transport,
                                             std::make_unique<ThreadMeeting>(workers), std::move(all));
  const RanksOutcome outcome = run_ranks(state, /*give_up_stalled=*/true);
  if (!outcome.stalled.empty())
    throw RankStalled(stall_text(outcome.stalled, state->shared, state->local, options.timeout_s));
  if (outcome.failure) throw_runtime("{}", *outcome.failure);
  set_step_times(state->result);
  return std::move(state->result);
}

RunResult run_schedule(const Schedule& schedule, Backend& backend, const RunOptions& options, ProcessGroup& group) {
  const Schedule lowered = checked_schedule(schedule, options);
  const int ranks = lowered.num_ranks();
  if (group.size() != ranks * options.replicas)
    throw_bad_input("processes: {} were started for a schedule of {} ranks{}; start one process per rank{}", group.size(),
                    ranks, options.replicas > 1 ? fmt::format(" x {} replicas", options.replicas) : "",
                    options.replicas > 1 ? " of each replica" : "");
  const std::unique_ptr<Transport> transport = group.transport_for(backend);
  return run_schedule(lowered, backend, options, group, *transport, {group.rank()});
}

RunResult run_schedule(const Schedule& schedule, Backend& backend, const RunOptions& options, ProcessGroup& group,
                       Transport& transport, const std::vector<int>& local_ranks) {
  const Schedule lowered = checked_schedule(schedule, options);
  const int ranks = lowered.num_ranks() * options.replicas;
  if (local_ranks.empty()) throw_runtime("process {} holds no rank of the schedule", group.rank());
  for (size_t i = 0; i < local_ranks.size(); ++i)
    if (local_ranks[i] < 0 || local_ranks[i] >= ranks || (i > 0 && local_ranks[i] <= local_ranks[i - 1]))
      throw_runtime("process {}: its ranks must be ascending ranks of the schedule's {}", group.rank(), ranks);
  const int me = local_ranks.front();
  auto state = std::make_shared<RankThreads>(lowered, options, backend, &transport,
                                             std::make_unique<ProcessMeeting>(group, static_cast<int>(local_ranks.size())),
                                             local_ranks);
  const RanksOutcome outcome = run_ranks(state, /*give_up_stalled=*/false);
  if (outcome.failure) {
    if (outcome.failed_elsewhere) throw RunFailedElsewhere(*outcome.failure);
    throw_runtime("{}", *outcome.failure);
  }
  RunResult result = std::move(state->result);

  const std::string where = fmt::format("{} failed at the gathering of the records", state->shared.name_of(me));
  std::vector<std::vector<std::byte>> gathered;
  try {
    gathered = group.gather(process_records_to_wire(local_ranks, result),
                            Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(options.timeout_s)));
  } catch (const PeerFailed& e) {
    throw RunFailedElsewhere(e.message);
  } catch (const RecvTimeout&) {
    const std::string message = fmt::format("{}: the other ranks' records did not arrive within {:g} s", where, options.timeout_s);
    transport.announce_failure(message);
    throw_runtime("{}", message);
  } catch (const PeerLost& e) {
    const std::string message =
        fmt::format("{} failed: its process ({}) ended while {} waited at the gathering of the records",
                    state->shared.name_of(e.rank), e.process, state->shared.name_of(me));
    transport.announce_failure(message);
    throw_runtime("{}", message);
  }
  for (size_t p = 1; p < gathered.size(); ++p) process_records_from_wire(gathered[p], result);
  set_step_times(result);
  return result;
}

}  // namespace pw
