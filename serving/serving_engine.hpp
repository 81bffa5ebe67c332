#pragma once
// One serving engine (serving/serving_sim.hpp describes what it models): its scheduler (continuous batching under
// the token budget, the sequence limit and the KV cache's pages, preemption) and its pipeline's timing. run()
// drives it alone; the data-parallel attention engines (serving/dp_attention_serving.hpp) step several in lockstep.
#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>
#include <vector>

#include "core/error.hpp"
#include "core/serving_work.hpp"
#include "core/special_values.hpp"
#include "core/units.hpp"
#include "core/work_estimate.hpp"
#include "core/workload.hpp"
#include "serving/serving_sim.hpp"

namespace pw {

namespace serving_detail {

inline constexpr double kValueBytes = 2;  // bf16 hidden states between stages
inline constexpr double kMaxCacheTokens = 1e15;

struct Live {
  long computed = 0;   // tokens with KV in the cache
  long generated = 0;  // output tokens produced
  long blocks = 0;     // KV pages held
  bool prefilled = false;  // its (re)prefill done: it decodes now
  bool admitted = false;
  bool in_flight = false;
  bool done = false;
  long admitted_order = 0;
  long verify_steps = 0;  // speculative decode steps so far (the tokens each gives follow from the count)
};

}  // namespace serving_detail

class ServingEngine {
 public:
  ServingEngine(const Model& model, const Cluster& cluster, const CostModel& cost, const ServingConfig& config,
                const std::vector<ServingRequest>& requests)
      : model_(model), cluster_(cluster), cost_(cost), c_(config), requests_(requests) {
    if (c_.tp < 1 || c_.pp < 1) throw_bad_input("--tp and --pp: must be at least 1, got {} and {}", c_.tp, c_.pp);
    if (c_.max_num_seqs < 1) throw_bad_input("--max-num-seqs: must be at least 1, got {}", c_.max_num_seqs);
    if (c_.max_num_batched_tokens < 1)
      throw_bad_input("--max-num-batched-tokens: must be at least 1, got {}", c_.max_num_batched_tokens);
    if (c_.block_tokens < 1) throw_bad_input("block size: must be at least 1 token, got {}", c_.block_tokens);
    if (c_.speculative_tokens < 0 || c_.speculative_tokens > kMaxSpeculativeTokens)
      throw_bad_input("--speculative-tokens: must be from 0 to {}, got {}", kMaxSpeculativeTokens, c_.speculative_tokens);
    if (c_.speculative_tokens > 0 && !(c_.acceptance_rate > 0 && c_.acceptance_rate <= 1))
      throw_bad_input("--acceptance-rate: must be in (0, 1], got {}", c_.acceptance_rate);
    if (c_.speculative_tokens > 0 && c_.pp > 1)
      throw_bad_input("--speculative-tokens with --pp {}: speculative decoding is modelled on one pipeline stage; use "
                      "--pp 1 (replicas or a wider tp for more GPUs)",
                      c_.pp);
    if (c_.speculative_tokens > 0) draft_ = draft_runs(model);
    stages_ = c_.stages.empty() ? split_layers(model, c_.pp, {}) : c_.stages;
    if (static_cast<int>(stages_.size()) != c_.pp)
      throw_bad_input("--pp {}: the stages give {} layer ranges", c_.pp, stages_.size());
    ParallelConfig pc;
    pc.tp = c_.tp;
    pc.pp = c_.pp;
    long capacity = std::numeric_limits<long>::max();
    for (int s = 0; s < c_.pp; ++s) {
      const int g = s * c_.tp;
      stage_gpu_.push_back(g);
      tp_link_.push_back(group_links(cluster, pc, g).tp);
      if (s + 1 < c_.pp) p2p_.push_back(cost.p2p_link(cluster.link(g, g + c_.tp)));
      if (s + 1 == c_.pp && s > 0) back_ = cost.p2p_link(cluster.link(g, 0));
      double weights = 0;
      int launches = 0;
      for (int i = stages_[static_cast<size_t>(s)].first; i <= stages_[static_cast<size_t>(s)].last; ++i) {
        const Layer& l = model.layers[static_cast<size_t>(i)];
        if (l.kind == LayerKind::Mtp) continue;
        weights += serving_layer_parameters(*model.transformer, l, c_.tp, c_.ep, c_.redundant_experts).total() * serving_weight_bytes(l.kind, c_.weights);
        launches += serving_layer_kernels(*model.transformer, l);
      }
      stage_launches_.push_back(launches);
      stage_runs_.push_back(serving_stage_runs(model, stages_[static_cast<size_t>(s)], c_.tp, c_.kv_dtype, c_.weights));
      const double gpu_bytes = cluster.memory_capacity_at(g);
      // vLLM and SGLang: a share of the GPU less the weights; TensorRT-LLM: a share of what loading left.
      const double room = c_.kv_share_of_free ? (gpu_bytes - weights - c_.activation_reserve_bytes) * c_.gpu_memory_utilization
                                              : gpu_bytes * c_.gpu_memory_utilization - weights - c_.activation_reserve_bytes;
      const double per_token = kv_bytes_for_tokens(model, stages_[static_cast<size_t>(s)], c_.tp, 1, c_.kv_dtype);
      if (!(room > 0))
        throw_bad_input("--tp {} --pp {}: stage {} holds {} of weights, and {} x {} of its {} leaves no room for a KV cache; "
                        "use more GPUs (a larger --tp or --pp)",
                        c_.tp, c_.pp, s, format_bytes(weights), format_percent(c_.gpu_memory_utilization),
                        format_bytes(cluster.memory_capacity_at(g)), format_bytes(cluster.memory_capacity_at(g)));
      // An unbounded memory (the ideal cluster) holds every token: kept finite so that pages can be counted.
      if (per_token > 0) capacity = std::min(capacity, static_cast<long>(std::min(room / per_token, serving_detail::kMaxCacheTokens)));
    }
    total_blocks_ = capacity / c_.block_tokens;
    capacity_tokens_ = total_blocks_ * c_.block_tokens;
    for (size_t i = 0; i < requests.size(); ++i) {
      const ServingRequest& r = requests[i];
      if (r.prompt_tokens < 1 || r.output_tokens < 1)
        throw_bad_input("request {}: needs at least one prompt and one output token, got {} and {}", i, r.prompt_tokens,
                        r.output_tokens);
      if (r.prefilled && r.output_tokens < 2)
        throw_bad_input("request {}: arrives prefilled with its one output token; nothing is left to decode", i);
      if (blocks_for(r.prompt_tokens + r.output_tokens + c_.speculative_tokens) > total_blocks_)
        throw_bad_input("request {}: {} tokens do not fit the KV cache's {} tokens (tp {}, pp {}); use more GPUs, "
                        "--kv-cache-dtype fp8 or shorter requests",
                        i, r.prompt_tokens + r.output_tokens, capacity_tokens_, c_.tp, c_.pp);
      if (!c_.chunked_prefill && r.prompt_tokens > c_.max_num_batched_tokens)
        throw_bad_input("request {}: its {}-token prompt exceeds --max-num-batched-tokens {} without chunked prefill; "
                        "raise the budget or enable chunked prefill",
                        i, r.prompt_tokens, c_.max_num_batched_tokens);
    }
    // Each prompt chunk and each output token is a slot of some step: bounded before the run.
    double chunks = 0, outputs = 0;
    for (const ServingRequest& r : requests) {
      chunks += c_.chunked_prefill ? std::ceil(static_cast<double>(r.prompt_tokens) / static_cast<double>(c_.max_num_batched_tokens)) : 1.0;
      outputs += static_cast<double>(r.output_tokens);
    }
    if (chunks + outputs > kMaxServingSlots)
      throw_bad_input("{} requests: {} prompt chunks (of --max-num-batched-tokens {}) and {} output tokens to simulate; the "
                      "limit is {} together; use fewer or shorter requests or a larger token budget",
                      requests.size(), format_count(chunks), c_.max_num_batched_tokens, format_count(outputs),
                      format_count(kMaxServingSlots));
    free_at_.assign(static_cast<size_t>(c_.pp), 0.0);
    out_.stage_busy_s.assign(static_cast<size_t>(c_.pp), 0.0);
    out_.kv_capacity_tokens = capacity_tokens_;
    live_.resize(requests.size());
    out_.requests.resize(requests.size());
    if (c_.concurrency < 0) throw_bad_input("--concurrency: must be at least 1, got {}", c_.concurrency);
    for (size_t i = 0; i < requests.size(); ++i) {
      arrivals_.push_back(i);
      const bool closed = c_.concurrency > 0;
      arrival_.push_back(!closed ? requests[i].arrival_s : (static_cast<long>(i) < c_.concurrency ? 0.0 : kInf));
      out_.requests[i].arrival_s = arrival_.back();
      out_.requests[i].prompt_tokens = requests[i].prompt_tokens;
      out_.requests[i].output_tokens = requests[i].output_tokens;
    }
    released_ = std::min(requests.size(), static_cast<size_t>(c_.concurrency));
    std::stable_sort(arrivals_.begin(), arrivals_.end(), [&](size_t a, size_t b) { return arrival_[a] < arrival_[b]; });
  }

  ServingResult run() {
    if (c_.ep > 1)
      throw_runtime("serving engine: experts over {} GPUs need the other engines' tokens; step it with them "
                    "(serving/dp_attention_serving.hpp)",
                    c_.ep);
    double now = 0;
    size_t finished = 0;
    while (finished < requests_.size()) {
      const double decide = std::max(now, free_at_[0]);
      finished += complete_until(decide);
      if (finished == requests_.size()) break;
      admit_arrivals(decide);
      ServingStep batch;
      if (static_cast<int>(flights_.size()) < c_.pp) batch = schedule();
      if (!batch.empty()) {
        launch(batch, decide);
        now = decide;
        continue;
      }
      // Nothing to run now: wait for the next arrival or batch to leave the pipeline.
      double next = kInf;
      if (next_arrival_ < arrivals_.size()) next = arrival_[arrivals_[next_arrival_]];
      if (!flights_.empty()) next = std::min(next, flights_.top().ready_s);
      if (next == kInf) throw_runtime("serving simulation: {} requests left and nothing can run", requests_.size() - finished);
      now = std::max(decide, next);
    }
    out_.token_gaps.settle();
    return out_;
  }


  // Lockstep use (serving/dp_attention_serving.hpp; pp 1): at a step's time every engine applies the batch that
  // ended, admits what arrived and forms its batch; the caller times the step for all and launches each.
  // Applies every batch that leaves the pipeline by t; returns the requests that finished.
  size_t complete_until(double t) {
    size_t finished = 0;
    while (!flights_.empty() && flights_.top().ready_s <= t) {
      const Flight f = flights_.top();
      flights_.pop();
      // The batch's token gaps, counted here first: its decodes mostly share their last step, so one gap.
      double gap = -1;
      long gaps = 0;
      for (const SequenceChunk& c : f.batch) {
        const size_t i = static_cast<size_t>(c.request);
        serving_detail::Live& l = live_[i];
        l.in_flight = false;
        if (!l.admitted) throw_runtime("serving simulation: request {} was preempted while in flight", i);
        // A verification keeps the accepted drafts' positions and gives them and the next token.
        const long given = c.verifies ? std::min(speculative_tokens_at_step(l.verify_steps++, c_.speculative_tokens,
                                                                            c_.acceptance_rate),
                                                 requests_[i].output_tokens - l.generated)
                                      : 1;
        l.computed += c.verifies ? given : c.tokens;
        if (!l.prefilled && l.computed < goal(i)) continue;  // more prompt to come
        l.prefilled = true;
        l.generated += given;
        ServedRequest& r = out_.requests[i];
        if (l.generated == 1) r.first_token_s = f.done_s;
        // The tokens of one step reach the client together: one gap (the benchmark tools' ITL, a gap a chunk).
        if (l.generated >= 2) {
          const double g = f.done_s - r.last_token_s;
          if (g != gap && gaps > 0) out_.token_gaps.add(gap, gaps), gaps = 0;
          gap = g;
          ++gaps;
        }
        r.last_token_s = f.done_s;
        out_.makespan_s = std::max(out_.makespan_s, f.done_s);
        if (l.generated >= requests_[i].output_tokens) {
          l.done = true;
          used_blocks_ -= l.blocks;
          l.blocks = 0;
          running_.erase(std::find(running_.begin(), running_.end(), i));
          ++finished;
          // A closed loop sends the next request at once.
          if (c_.concurrency > 0 && released_ < requests_.size()) {
            arrival_[released_] = f.done_s;
            out_.requests[released_].arrival_s = f.done_s;
            ++released_;
          }
        }
      }
      if (gaps > 0) out_.token_gaps.add(gap, gaps);
    }
    finished_ += finished;
    return finished;
  }

  void admit_arrivals(double t) {
    while (next_arrival_ < arrivals_.size() && arrival_[arrivals_[next_arrival_]] <= t)
      waiting_.push_back(arrivals_[next_arrival_++]);
  }

  // Forms the next batch. Mixed (vLLM V1, TensorRT-LLM): running requests first, then waiting ones, under the
  // token budget and the cache. Prefill-first (SGLang, vLLM V0): a step of prompts (chunks under way, then
  // admissions) whenever one can be formed, else a step of every running decode.
  ServingStep schedule() {
    ServingStep batch;
    long budget = c_.max_num_batched_tokens;
    if (c_.retract == ServingRetract::FewestGenerated) retract_for_decodes();
    if (!c_.prefill_first) {
      if (take_running(batch, budget, true, true)) admit_waiting(batch, budget);
      return batch;
    }
    if (take_running(batch, budget, false, true)) admit_waiting(batch, budget);
    if (batch.empty()) {
      long decodes = std::numeric_limits<long>::max();  // a decode step carries every running request
      take_running(batch, decodes, true, false);
    }
    return batch;
  }

  // Launches a batch on a one-stage engine whose step the caller timed (every rank's batch together).
  void launch_timed(ServingStep batch, double start, double time) {
    if (c_.pp != 1) throw_runtime("serving engine: a timed launch needs pp 1, got {}", c_.pp);
    if (c_.record_steps) out_.steps.push_back(batch);
    free_at_[0] = start + time;
    out_.stage_busy_s[0] += time;
    if (c_.record_spans) out_.spans.push_back({0, out_.batches, start, start + time, serving_batch(batch).tokens()});
    flights_.push(Flight{start + time, start + time, out_.batches++, std::move(batch)});
  }
  // The next request's arrival not yet admitted; infinity when none is left.
  double next_arrival_s() const { return next_arrival_ < arrivals_.size() ? arrival_[arrivals_[next_arrival_]] : kInf; }
  double free_at_s() const { return free_at_[0]; }
  bool busy() const { return !flights_.empty(); }
  bool done() const { return finished_ == requests_.size(); }
  const ServingResult& result() const { return out_; }

  // The least time from one of a request's tokens to its next when that decode runs at `context` tokens: a step
  // holding the decode alone (unpadded), its flight through an idle pipeline and back to the first stage, where
  // the next step holding the request can start only then. Any step holding the decode (more sequences, more
  // context, a prompt's chunk, graph padding) takes no less where CostModel::serving_time_monotone.
  // With speculative decoding a step gives at most K + 1 tokens: the floor is its time over them.
  double token_gap_floor_s(long context) const {
    const int k = c_.speculative_tokens;
    const ServingStep step{{0, context - 1, 1 + k, true, k > 0}};
    const ServingBatch alone = serving_batch(step);
    double t = host_s(alone);
    for (size_t su = 0; su < static_cast<size_t>(c_.pp); ++su) {
      t += stage_s(su, alone);
      if (su + 1 < static_cast<size_t>(c_.pp)) t += hop_s(su, alone);
    }
    return (t + draft_s(step) + back_s(alone)) / (1 + k);
  }

 private:
  struct Flight {
    double done_s;   // its tokens sampled on the last stage
    double ready_s;  // they are back on the first stage, where the next batch is formed
    long id;
    ServingStep batch;
    bool operator>(const Flight& o) const { return ready_s != o.ready_s ? ready_s > o.ready_s : id > o.id; }
  };

  // Running requests in admission order: a token each for decodes, the next chunk for prefills. As in vLLM's
  // scheduler, one that cannot get its pages ends the pass. False when the pass preempted (then no waiting
  // request is admitted this step).
  bool take_running(ServingStep& batch, long& budget, bool decodes, bool prefills) {
    const long preempted_before = out_.preemptions;
    const std::vector<size_t> running = running_;
    for (size_t i : running) {
      if (budget <= 0) break;
      serving_detail::Live& l = live_[i];
      if (!l.admitted || l.in_flight || l.done) continue;
      const bool decode = l.prefilled;
      if (decode ? !decodes : !prefills) continue;
      const long left = goal(i) - l.computed;
      const long tokens = decode ? 1 + c_.speculative_tokens : (c_.chunked_prefill ? std::min(left, budget) : left);
      if (tokens > budget) continue;
      if (!reserve(i, l.computed + tokens, true)) break;
      batch.push_back(chunk(i, tokens));
      l.in_flight = true;
      budget -= tokens;
    }
    return out_.preemptions == preempted_before;
  }

  // Waiting requests in order, while the budget, the sequence limit and the cache allow: the first chunk's
  // pages, and with reserved outputs (TensorRT-LLM, SGLang) every running request's reservation kept free.
  void admit_waiting(ServingStep& batch, long& budget) {
    // The running requests' reservations, summed only when a request could be admitted (a step with nobody
    // waiting, the common decode step, skips the pass).
    long promised = 0;
    if (c_.reserved_output_tokens > 0 && !waiting_.empty() && static_cast<int>(running_.size()) < c_.max_num_seqs)
      for (size_t r : running_) promised += promised_blocks(r);
    while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < c_.max_num_seqs) {
      const size_t i = waiting_.front();
      serving_detail::Live& l = live_[i];
      if (c_.reserved_output_tokens > 0 && used_blocks_ + promised + promised_blocks(i) > total_blocks_) break;
      if (arrives_prefilled(i)) {
        // Its prompt's KV cache came with it: it takes its pages and decodes its second token at once.
        if (!reserve(i, requests_[i].prompt_tokens + 1 + c_.speculative_tokens, false)) break;
        waiting_.pop_front();
        l.computed = requests_[i].prompt_tokens;
        l.prefilled = true;
        l.generated = 1;
        out_.requests[i].first_token_s = arrival_[i];
        // Its second token's gap runs from when the client got the first (before the cache's transfer).
        out_.requests[i].last_token_s = requests_[i].first_token_s > 0 ? requests_[i].first_token_s : arrival_[i];
        admit(i);
        batch.push_back(chunk(i, 1 + c_.speculative_tokens));
        budget -= 1 + c_.speculative_tokens;
      } else {
        const long left = goal(i);
        const long tokens = c_.chunked_prefill ? std::min(left, budget) : left;
        if (tokens > budget || !reserve(i, tokens, false)) break;
        waiting_.pop_front();
        admit(i);
        batch.push_back(chunk(i, tokens));
        budget -= tokens;
      }
      if (c_.reserved_output_tokens > 0) promised += promised_blocks(i);
    }
  }

  // SGLang's retract_decode: before a step, while the cache cannot give every running decode its next token's
  // page, the first to give back (gives_back_before) goes back to waiting.
  void retract_for_decodes() {
    for (;;) {
      long need = 0;
      size_t victim = requests_.size();
      for (size_t r : running_) {
        const serving_detail::Live& l = live_[r];
        if (l.in_flight || !l.prefilled) continue;
        need += blocks_for(l.computed + 1 + c_.speculative_tokens) - l.blocks;
        if (victim == requests_.size() || gives_back_before(r, victim)) victim = r;
      }
      if (used_blocks_ + need <= total_blocks_ || victim == requests_.size()) return;
      preempt(victim);
    }
  }

  // Pages request i may still take under its reservation: its (re)prefill and the next
  // reserved_output_tokens of its output, less the pages it holds.
  long promised_blocks(size_t i) const {
    const serving_detail::Live& l = live_[i];
    const long ahead = std::min(requests_[i].output_tokens - l.generated, c_.reserved_output_tokens);
    return std::max(0L, blocks_for(requests_[i].prompt_tokens + l.generated + ahead) - l.blocks);
  }

  long blocks_for(long tokens) const { return (tokens + c_.block_tokens - 1) / c_.block_tokens; }
  // The tokens a (re)prefill computes: the prompt, and after a preemption every token generated so far (vLLM
  // recomputes them), the last of them sampling the next token.
  long goal(size_t i) const { return requests_[i].prompt_tokens + live_[i].generated; }

  // Grows request i's pages to `tokens`, preempting the latest admitted running request not in flight, as
  // vLLM's scheduler pops the last of its running queue: when that is i itself, i goes back to waiting.
  bool reserve(size_t i, long tokens, bool may_preempt) {
    const long need = blocks_for(tokens) - live_[i].blocks;
    while (used_blocks_ + need > total_blocks_) {
      if (!may_preempt) return false;
      size_t victim = requests_.size();
      for (size_t r : running_)
        if (!live_[r].in_flight && (victim == requests_.size() || gives_back_before(r, victim))) victim = r;
      if (victim == requests_.size()) return false;
      preempt(victim);
      if (victim == i) return false;
    }
    used_blocks_ += need;
    live_[i].blocks += need;
    out_.peak_kv_use = std::max(out_.peak_kv_use, static_cast<double>(used_blocks_) / static_cast<double>(total_blocks_));
    return true;
  }

  // Whether running request a gives its pages back before b: vLLM the latest admitted; SGLang's retraction
  // the fewest output tokens, then the longest prompt.
  bool gives_back_before(size_t a, size_t b) const {
    if (c_.retract == ServingRetract::FewestGenerated) {
      if (live_[a].generated != live_[b].generated) return live_[a].generated < live_[b].generated;
      if (requests_[a].prompt_tokens != requests_[b].prompt_tokens) return requests_[a].prompt_tokens > requests_[b].prompt_tokens;
    }
    return live_[a].admitted_order > live_[b].admitted_order;
  }

  void preempt(size_t r) {
    used_blocks_ -= live_[r].blocks;
    live_[r].blocks = 0;
    live_[r].computed = 0;
    live_[r].prefilled = false;
    live_[r].admitted = false;
    running_.erase(std::find(running_.begin(), running_.end(), r));
    waiting_.push_front(r);
    ++out_.requests[r].preemptions;
    ++out_.preemptions;
  }

  // Request i's next `tokens` positions; it samples when they end its prompt or it decodes.
  SequenceChunk chunk(size_t i, long tokens) const {
    const serving_detail::Live& l = live_[i];
    return {static_cast<long>(i), l.computed, tokens, l.prefilled || l.computed + tokens >= goal(i),
            l.prefilled && c_.speculative_tokens > 0};
  }

  // A decode pool's request on its first admission (after a preemption it recomputes like any other).
  bool arrives_prefilled(size_t i) const { return requests_[i].prefilled && live_[i].generated == 0; }

  void admit(size_t i) {
    serving_detail::Live& l = live_[i];
    l.admitted = true;
    l.admitted_order = admissions_++;
    l.in_flight = true;
    running_.push_back(i);
    out_.max_running = std::max<long>(out_.max_running, static_cast<long>(running_.size()));
  }

  // A decode-only step replayed from a CUDA graph runs at the captured size it pads to.
  ServingBatch priced(const ServingBatch& b) const {
    ServingBatch p = b;
    if (c_.eager || !c_.pad_to_graph || b.prefill_tokens > 0) return p;
    const auto size = std::lower_bound(c_.graph_batch_sizes.begin(), c_.graph_batch_sizes.end(), b.decode_tokens);
    if (size != c_.graph_batch_sizes.end()) p.decode_tokens = *size;
    return p;
  }

  // The draft's K steps before a step's verifications: each its block and LM head at the verifying decodes, over
  // their contexts (the draft keeps a cache of its own as long). 0 without verifications.
  double draft_s(const ServingStep& step) const {
    if (c_.speculative_tokens == 0) return 0;  // every step passes here: no walk over its chunks without drafts
    const ServingBatch decodes = draft_batch(step);
    if (decodes.decode_tokens == 0) return 0;
    const size_t last = static_cast<size_t>(c_.pp - 1);
    return c_.speculative_tokens *
           serving_stage_time(draft_, decodes, cluster_.gpu_at(stage_gpu_[last]), tp_link_[last], cost_);
  }
  // The draft: one block of the model's last block's shape and its LM head.
  ServingStageRuns draft_runs(const Model& model) const {
    ServingStageRuns draft;
    for (auto it = model.layers.rbegin(); it != model.layers.rend(); ++it)
      if (it->kind == LayerKind::Block) {
        draft.runs.emplace_back(serving_layer_shape(model, *it, c_.tp, c_.kv_dtype, c_.weights), 1);
        break;
      }
    for (const Layer& l : model.layers)
      if (l.kind == LayerKind::Head) draft.runs.emplace_back(serving_layer_shape(model, l, c_.tp, c_.kv_dtype, c_.weights), 1);
    return draft;
  }

  // Stage su's time for a batch priced as `work`. Eager (every step, or a step with prefills where the engine
  // captures no prefill graphs): the host launches each kernel in turn, the GPU waiting on it for small kernels.
  double stage_s(size_t su, const ServingBatch& work) const {
    const bool eager = c_.eager || (c_.eager_prefill && work.prefill_tokens > 0);
    return serving_stage_time(stage_runs_[su], work, cluster_.gpu_at(stage_gpu_[su]), tp_link_[su], cost_) +
           (eager ? stage_launches_[su] * c_.launch_s : 0.0);
  }
  // The scheduler's host time the first stage waits for.
  double host_s(const ServingBatch& b) const { return c_.host_s_per_sequence * static_cast<double>(b.sequences()); }
  // The batch's hidden states from stage su to the next.
  double hop_s(size_t su, const ServingBatch& b) const {
    const LinkSpec& link = p2p_[su];
    return link.latency_s + static_cast<double>(b.tokens()) * model_.transformer->hidden * serving_detail::kValueBytes / link.bandwidth_bytes_per_s;
  }
  // The sampled tokens back from the last stage to the first (vLLM's engine forms the next batch there).
  double back_s(const ServingBatch& b) const {
    return c_.pp > 1 ? back_.latency_s + 4.0 * static_cast<double>(b.sampled_tokens) / back_.bandwidth_bytes_per_s : 0;
  }

  void launch(ServingStep batch, double t) {
    const ServingBatch b = serving_batch(batch);
    const ServingBatch work = priced(b);
    if (c_.record_steps) out_.steps.push_back(batch);
    double ready = t;
    const double draft = draft_s(batch);
    for (int s = 0; s < c_.pp; ++s) {
      const size_t su = static_cast<size_t>(s);
      const double time = stage_s(su, work) + (s + 1 == c_.pp ? draft : 0.0);
      const double host = s == 0 ? host_s(b) : 0.0;
      const double start = std::max(free_at_[su], ready) + host;
      free_at_[su] = start + time;
      out_.stage_busy_s[su] += time;
      if (c_.record_spans) out_.spans.push_back({s, out_.batches, start, start + time, b.tokens()});
      ready = free_at_[su];
      if (s + 1 < c_.pp) ready += hop_s(su, b);
    }
    flights_.push(Flight{ready, ready + back_s(b), out_.batches++, std::move(batch)});
  }

  const Model& model_;
  const Cluster& cluster_;
  const CostModel& cost_;
  const ServingConfig& c_;
  const std::vector<ServingRequest>& requests_;
  std::vector<LayerRange> stages_;
  std::vector<ServingStageRuns> stage_runs_;  // per stage, its layers' shapes made once
  ServingStageRuns draft_;                    // speculative decoding's draft (draft_runs)
  std::vector<int> stage_gpu_;
  std::vector<int> stage_launches_;  // kernels a stage launches a step without CUDA graphs
  std::vector<LinkSpec> tp_link_, p2p_;
  LinkSpec back_;  // from the last stage's first GPU to the first stage's
  long total_blocks_ = 0, capacity_tokens_ = 0, used_blocks_ = 0, admissions_ = 0;
  std::vector<serving_detail::Live> live_;
  std::vector<size_t> arrivals_;  // by arrival (a closed loop: in the order given)
  std::vector<double> arrival_;   // per request; a closed loop's unreleased ones: infinity
  size_t next_arrival_ = 0;
  size_t released_ = 0;           // a closed loop's requests sent so far
  size_t finished_ = 0;
  std::deque<size_t> waiting_;
  std::vector<size_t> running_;
  std::vector<double> free_at_;
  std::priority_queue<Flight, std::vector<Flight>, std::greater<Flight>> flights_;
  ServingResult out_;
};

}  // namespace pw
