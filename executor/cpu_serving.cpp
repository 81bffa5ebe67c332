#include "executor/cpu_serving.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "executor/cpu_model.hpp"
#include "executor/spin_wait.hpp"

namespace pw {
namespace {

using Clock = std::chrono::steady_clock;

// Hidden states from one stage to the next, in batch order; close() wakes a waiting stage when another failed.
class StageQueue {
 public:
  void push(Mat m) {
    {
      std::lock_guard<std::mutex> lock(m_);
      items_.push_back(std::move(m));
      pushed_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_one();
  }
  // False when closed. `spin`: spin a while before sleeping (executor/spin_wait.hpp).
  bool pop(Mat& out, bool spin) {
    if (spin) {
      unsigned long seen = 0;
      {
        std::lock_guard<std::mutex> lock(m_);
        seen = pushed_.load(std::memory_order_relaxed) - items_.size();
      }
      spin_until_changed(pushed_, seen);
    }
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return false;
    out = std::move(items_.front());
    items_.pop_front();
    return true;
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(m_);
      closed_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Mat> items_;
  std::atomic<unsigned long> pushed_{0};
  bool closed_ = false;
};

struct RequestState {
  std::vector<int> tokens;  // prompt, then every token generated
  long launched = 0;        // chunks the first stage started
  long completed = 0;       // chunks the last stage finished
  long generated = 0;
  bool released = false;
  double arrival_s = std::numeric_limits<double>::infinity();
};

class ServingRuntime {
 public:
  ServingRuntime(const Model& model, const std::vector<LayerRange>& stages, const std::vector<ServingStep>& steps,
                 const std::vector<ServingRequest>& requests, int concurrency, std::uint64_t seed)
      : cpu_(model, seed), stages_(stages), steps_(steps), requests_(requests), concurrency_(concurrency),
        queues_(stages.size()), caches_(stages.size()), busy_(stages.size(), 0.0), state_(requests.size()) {
    const long vocab = model.transformer->vocab;
    for (size_t r = 0; r < requests.size(); ++r) {
      capacity_.push_back(requests[r].prompt_tokens + requests[r].output_tokens);
      state_[r].tokens = serving_prompt(seed, static_cast<long>(r), requests[r].prompt_tokens, vocab);
      // A closed loop's first `concurrency` requests arrive at once, the others when one finishes (finish()).
      const bool closed = concurrency > 0;
      state_[r].released = !closed || static_cast<long>(r) < concurrency;
      if (!closed || state_[r].released) state_[r].arrival_s = closed ? 0.0 : requests[r].arrival_s;
    }
    released_ = concurrency > 0 ? std::min(requests.size(), static_cast<size_t>(concurrency)) : requests.size();
    spin_ = spin_allowed(static_cast<int>(stages.size()));
    out_.requests.resize(requests.size());
  }

  CpuServingRun run() {
    start_ = Clock::now();
    std::vector<std::thread> threads;
    for (size_t s = 0; s < stages_.size(); ++s) threads.emplace_back([this, s] { stage_loop(s); });
    for (std::thread& t : threads) t.join();
    if (failure_) std::rethrow_exception(failure_);
    CpuServingRun run;
    run.measured = std::move(out_);
    run.measured.batches = static_cast<long>(steps_.size());
    run.measured.stage_busy_s = busy_;
    for (const CpuKvCache& c : caches_) run.peak_kv_bytes = std::max(run.peak_kv_bytes, c.peak_bytes());
    for (size_t r = 0; r < state_.size(); ++r)
      run.outputs.emplace_back(state_[r].tokens.begin() + requests_[r].prompt_tokens, state_[r].tokens.end());
    for (size_t r = 0; r < state_.size(); ++r) {
      run.measured.requests[r].arrival_s = state_[r].arrival_s;
      run.measured.requests[r].prompt_tokens = requests_[r].prompt_tokens;
      run.measured.requests[r].output_tokens = state_[r].generated;
    }
    return run;
  }

 private:
  double now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  void stage_loop(size_t s) {
    try {
      const bool first = s == 0, last = s + 1 == stages_.size();
      for (size_t k = 0; k < steps_.size(); ++k) {
        ServeInput in;
        in.step = &steps_[k];
        in.cache = &caches_[s];
        in.capacity = &capacity_;
        for (const SequenceChunk& c : steps_[k])
          for (long i = 0; i < c.tokens; ++i) in.positions.push_back(c.start + i);
        Mat x;
        if (first) {
          if (!wait_ready(k, in.tokens)) return;
        } else if (!queues_[s].pop(x, spin_)) {
          return;
        }
        const Clock::time_point begin = Clock::now();
        Mat y = cpu_.serve(stages_[s], x, in);
        for (const SequenceChunk& c : steps_[k])
          if (c.samples && c.start + c.tokens == capacity_[static_cast<size_t>(c.request)] - 1) caches_[s].drop(c.request);
        busy_[s] += std::chrono::duration<double>(Clock::now() - begin).count();
        if (last) {
          finish(k, y);
        } else {
          queues_[s + 1].push(std::move(y));
        }
      }
    } catch (...) {
      fail(std::current_exception());
    }
  }

  // The first stage's wait for batch k: at most as many batches in flight as stages, every request arrived
  // and its previous chunk done. Fills the batch's token ids; false when another stage failed.
  bool wait_ready(size_t k, std::vector<int>& tokens) {
    std::unique_lock<std::mutex> lock(m_);
    const long in_flight = static_cast<long>(stages_.size());
    for (;;) {
      if (failure_) return false;
      bool ready = static_cast<long>(k) - done_steps_ < in_flight;
      double next_arrival = std::numeric_limits<double>::infinity();
      const double t = now();
      for (const SequenceChunk& c : steps_[k]) {
        const RequestState& r = state_[static_cast<size_t>(c.request)];
        if (!r.released || r.completed != r.launched) ready = false;
        if (r.released && r.arrival_s > t) {
          ready = false;
          next_arrival = std::min(next_arrival, r.arrival_s);
        }
      }
      if (ready) break;
      if (spin_ && next_arrival == std::numeric_limits<double>::infinity()) {
        // The next batch usually waits on the last stage's next finish: caught by a spin, not a wake-up.
        const unsigned long seen = progress_.load(std::memory_order_relaxed);
        lock.unlock();
        const bool changed = spin_until_changed(progress_, seen);
        lock.lock();
        if (changed || progress_.load(std::memory_order_relaxed) != seen) continue;
      }
      if (next_arrival < std::numeric_limits<double>::infinity())
        cv_.wait_until(lock, start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(next_arrival)));
      else
        cv_.wait(lock);
    }
    for (const SequenceChunk& c : steps_[k]) {
      RequestState& r = state_[static_cast<size_t>(c.request)];
      if (c.start + c.tokens > static_cast<long>(r.tokens.size()))
        throw_runtime("serving run: batch {} asks request {} for positions up to {}, but it has {} tokens", k, c.request,
                      c.start + c.tokens, r.tokens.size());
      tokens.insert(tokens.end(), r.tokens.begin() + c.start, r.tokens.begin() + c.start + c.tokens);
      ++r.launched;
    }
    return true;
  }

  // The last stage's end of batch k: each sampling chunk's greedy next token, the times, the closed loop's
  // next requests.
  void finish(size_t k, const Mat& logits) {
    std::lock_guard<std::mutex> lock(m_);
    const double t = now();
    Eigen::Index row = 0;
    for (const SequenceChunk& c : steps_[k]) {
      const size_t i = static_cast<size_t>(c.request);
      RequestState& r = state_[i];
      ++r.completed;
      if (!c.samples) continue;
      Eigen::Index best = 0;
      logits.row(row++).maxCoeff(&best);
      r.tokens.push_back(static_cast<int>(best));
      ServedRequest& served = out_.requests[i];
      if (++r.generated == 1) served.first_token_s = t;
      served.last_token_s = t;
      out_.makespan_s = std::max(out_.makespan_s, t);
      if (r.generated == requests_[i].output_tokens && concurrency_ > 0 && released_ < state_.size()) {
        state_[released_].released = true;
        state_[released_].arrival_s = t;
        ++released_;
      }
    }
    ++done_steps_;
    progress_.fetch_add(1, std::memory_order_release);
    cv_.notify_all();
  }

  void fail(std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> lock(m_);
      if (!failure_) failure_ = e;
    }
    cv_.notify_all();
    for (StageQueue& q : queues_) q.close();
  }

  CpuModel cpu_;
  const std::vector<LayerRange>& stages_;
  const std::vector<ServingStep>& steps_;
  const std::vector<ServingRequest>& requests_;
  int concurrency_;
  std::vector<StageQueue> queues_;
  std::vector<CpuKvCache> caches_;
  std::vector<double> busy_;
  std::vector<long> capacity_;
  Clock::time_point start_;

  std::mutex m_;
  std::condition_variable cv_;
  std::vector<RequestState> state_;
  size_t released_ = 0;
  long done_steps_ = 0;
  std::atomic<unsigned long> progress_{0};  // batches finished, for a spinning first stage
  bool spin_ = false;
  ServingResult out_;
  std::exception_ptr failure_;
};

}  // namespace

double stage_handover_s(int round_trips) {
  StageQueue there, back;
  const bool spin = spin_allowed(2);
  std::thread echo([&] {
    Mat m;
    while (there.pop(m, spin)) back.push(std::move(m));
  });
  std::vector<double> samples;
  for (int i = 0; i < std::max(1, round_trips); ++i) {
    Mat m(1, 1);
    const Clock::time_point begin = Clock::now();
    there.push(std::move(m));
    back.pop(m, spin);
    samples.push_back(std::chrono::duration<double>(Clock::now() - begin).count() / 2);
  }
  there.close();
  echo.join();
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

std::vector<int> serving_prompt(std::uint64_t seed, long request, long tokens, long vocab) {
  Rng rng(seed_for(seed, "request " + std::to_string(request)));
  std::vector<int> out;
  out.reserve(static_cast<size_t>(tokens));
  for (long i = 0; i < tokens; ++i) out.push_back(static_cast<int>(rng.next() % static_cast<std::uint64_t>(vocab)));
  return out;
}

CpuServingRun serve_on_cpu(const Model& model, const std::vector<LayerRange>& stages,
                           const std::vector<ServingStep>& steps, const std::vector<ServingRequest>& requests,
                           int concurrency, std::uint64_t seed) {
  check_cpu_model(model);
  if (stages.empty()) throw_bad_input("--pp: the serving run needs at least one stage");
  if (stages.front().first != 0 || stages.back().last != static_cast<int>(model.layers.size()) - 1)
    throw_bad_input("stages: must run from the embedding (layer 0) to the head (layer {})", model.layers.size() - 1);
  const TransformerConfig& t = *model.transformer;
  if (t.learned_positions)
    for (size_t r = 0; r < requests.size(); ++r)
      if (requests[r].prompt_tokens + requests[r].output_tokens - 1 > t.max_seq_len)
        throw_bad_input("request {}: {} prompt and {} output tokens pass the {} positions '{}' learned; use shorter "
                        "requests",
                        r, requests[r].prompt_tokens, requests[r].output_tokens, t.max_seq_len, model.name);
  for (size_t k = 0; k < steps.size(); ++k)
    for (const SequenceChunk& c : steps[k]) {
      if (c.request < 0 || c.request >= static_cast<long>(requests.size()))
        throw_bad_input("serving steps: batch {} names request {} of {}", k, c.request, requests.size());
      const ServingRequest& r = requests[static_cast<size_t>(c.request)];
      if (c.start < 0 || c.tokens < 1 || c.start + c.tokens > r.prompt_tokens + r.output_tokens - 1)
        throw_bad_input("serving steps: batch {} computes positions {} to {} of request {}, which has {}", k, c.start,
                        c.start + c.tokens - 1, c.request, r.prompt_tokens + r.output_tokens - 1);
    }
  ServingRuntime runtime(model, stages, steps, requests, concurrency, seed);
  return runtime.run();
}

}  // namespace pw
