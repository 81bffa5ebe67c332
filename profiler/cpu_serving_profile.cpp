#include "profiler/cpu_serving_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <thread>

#include "core/error.hpp"
#include "core/version.hpp"
#include "executor/cpu_model.hpp"
#include "executor/cpu_serving.hpp"
#include "executor/host_memory.hpp"
#include "profiler/cpu_profiler.hpp"
#include "profiler/profile.hpp"

namespace pw {
namespace {

using Clock = std::chrono::steady_clock;

// `count` sequences decoding one token each at `context` positions (their own included), after `first`.
void add_decodes(ServingStep& step, long first, int count, long context) {
  for (int i = 0; i < count; ++i) step.push_back({first + i, context - 1, 1, true});
}

std::vector<ServingStep> serving_grid(const ServingProfileRequest& r, long positions) {
  if (!r.batches.empty()) return r.batches;
  const long tokens = std::min(r.max_batched_tokens, positions), context = std::min(r.max_context, positions);
  std::vector<long> contexts{std::max(2L, context / 8), std::max(2L, context / 2), std::max(2L, context)};
  contexts.erase(std::unique(contexts.begin(), contexts.end()), contexts.end());
  std::vector<ServingStep> grid;
  for (long c = std::min(8L, tokens); c <= tokens; c *= 2) grid.push_back({{0, 0, c, true}});
  // A chunk after cached positions, reading them too.
  if (tokens / 2 >= 1 && context / 2 + tokens / 2 <= positions) grid.push_back({{0, context / 2, tokens / 2, false}});
  for (int b = 1; b <= r.max_seqs; b *= 2)
    for (long ctx : contexts) {
      grid.emplace_back();
      add_decodes(grid.back(), 0, b, ctx);
    }
  for (int b : {1, std::max(1, r.max_seqs / 2)}) {
    ServingStep mixed{{0, 0, std::max(1L, tokens / 2), true}};
    add_decodes(mixed, 1, b, contexts[contexts.size() / 2]);
    grid.push_back(mixed);
  }
  return grid;
}

// Each layer of `small` timed as it runs in a stage among the model's others: as many copies of it as the
// model has layers of its kind (up to kMaxCopies), each with its own weights and KV cache, the batch through
// all of them in a row, so that weights and caches leave the CPU's caches between uses as they do in a run.
constexpr int kMaxCopies = 16;

// A matrix moved from one stage to the next costs no time per byte; the link's bandwidth stands for that.
constexpr double kMovedBytesPerSecond = 1e18;

// One layer serving one step, with its inputs and a cache per copy.
struct Item {
  int layer = 0;
  ServeInput in;
  std::vector<long> capacity;
  std::vector<CpuKvCache> caches;
  Mat x;
  ServingSample sample;
};

struct Bench {
  std::vector<std::vector<std::unique_ptr<CpuLayer>>> copies;  // by layer of `small`
  std::vector<std::unique_ptr<Item>> items;

  // Seconds per copy of one run of item k.
  double run(Item& it) {
    std::vector<std::unique_ptr<CpuLayer>>& layers = copies[static_cast<size_t>(it.layer)];
    const auto t0 = Clock::now();
    for (size_t k = 0; k < layers.size(); ++k) {
      it.in.cache = &it.caches[k];
      const Mat y = layers[k]->serve(it.x, it.in, it.layer);
    }
    return std::chrono::duration<double>(Clock::now() - t0).count() / static_cast<double>(layers.size());
  }
};

// The copies of a layer of `kind` the bench times in a row: as many as `model` has, at most kMaxCopies.
int copies_of(const Model& model, const std::string& kind) {
  const TransformerConfig& c = *model.transformer;
  int count = 0;
  for (const Layer& l : model.layers)
    if (l.kind != LayerKind::Mtp && profile_kind(c, l) == kind) ++count;
  return std::clamp(count, 1, kMaxCopies);
}

// Every layer of `small` (one of each kind of `model`) serving every batch of `grid`.
Bench make_bench(const Model& model, const Model& small, const std::vector<ServingStep>& grid) {
  const TransformerConfig& c = *small.transformer;
  Bench bench;
  for (int i = 0; i < small.num_layers(); ++i) {
    const Layer& layer = small.layers[static_cast<size_t>(i)];
    bench.copies.emplace_back();
    if (layer.kind == LayerKind::Mtp) continue;
    const std::string kind = profile_kind(c, layer);
    for (int k = 0; k < copies_of(model, kind); ++k)
      bench.copies.back().push_back(make_cpu_layer(small, i, static_cast<std::uint64_t>(k + 1)));
    for (const ServingStep& step : grid) {
      auto it = std::make_unique<Item>();
      it->layer = i;
      it->caches.resize(bench.copies.back().size());
      long rows = 0, requests = 0;
      for (const SequenceChunk& ch : step) {
        rows += ch.tokens;
        requests = std::max(requests, ch.request + 1);
      }
      it->capacity.assign(static_cast<size_t>(requests), 0);
      Rng rng(static_cast<std::uint64_t>(rows));
      for (const SequenceChunk& ch : step) {
        long& cap = it->capacity[static_cast<size_t>(ch.request)];
        cap = std::max(cap, ch.start + ch.tokens);
        for (long p = ch.start; p < ch.start + ch.tokens; ++p) {
          it->in.positions.push_back(p);
          it->in.tokens.push_back(static_cast<int>(rng.next() % static_cast<std::uint64_t>(c.vocab)));
        }
      }
      it->in.step = &step;
      it->in.capacity = &it->capacity;
      it->x = random_matrix(rows, c.hidden, 7);
      const ServingBatch b = serving_batch(step);
      it->sample.kind = kind;
      it->sample.prefill_tokens = b.prefill_tokens;
      it->sample.decode_tokens = b.decode_tokens;
      it->sample.context = b.decode_context;
      it->sample.work = serving_layer_work(small, layer, 1, b);
      bench.items.push_back(std::move(it));
    }
  }
  return bench;
}

// The stages of a run compute at once on this machine's cores: while the profile times, as many threads as
// the run's other stages serve the same batches (each its own copies), so that the times include what they
// take from each other.
class Load {
 public:
  Load(const Model& model, const Model& small, const std::vector<ServingStep>& grid, int threads)
      : model_(model), small_(small), grid_(grid), threads_(threads) {}
  ~Load() { stop(); }
  void start() {
    stop_ = false;
    for (int t = 0; t < threads_; ++t)
      running_.emplace_back([this] {
        Bench mine = make_bench(model_, small_, grid_);
        while (!stop_)
          for (const std::unique_ptr<Item>& it : mine.items) {
            if (stop_) break;
            mine.run(*it);
          }
      });
  }
  void stop() {
    stop_ = true;
    for (std::thread& t : running_) t.join();
    running_.clear();
  }

 private:
  const Model& model_;
  const Model& small_;
  const std::vector<ServingStep>& grid_;
  int threads_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> running_;
};

}  // namespace

ServingProfile profile_cpu_serving(const Model& model, const ServingProfileRequest& request) {
  check_cpu_model(model);
  if (request.max_batched_tokens < 1 || request.max_seqs < 1 || request.max_context < 2)
    throw_bad_input("serving profile: needs at least 1 batched token, 1 sequence and a 2-token context, got {}, {} and {}",
                    request.max_batched_tokens, request.max_seqs, request.max_context);
  keep_freed_host_memory();  // as the serving runtime runs them
  const Model small = one_block_per_kind(model);
  const TransformerConfig& c = *small.transformer;
  const long positions = c.learned_positions ? c.max_seq_len : std::max(request.max_context, request.max_batched_tokens) * 2;
  const std::vector<ServingStep> grid = serving_grid(request, positions);
  // Each turn times a fresh bench: a run allocates its own weights and caches, and where they land moves its
  // speed by tens of percent on this kind of machine, so the profile must see as many placements as the runs
  // do. Within a turn, the items take their share of the repetitions and time. A batch's time is
  // median_of_turn_means: a run's time is the sum of its batches', hitches included (a median of all the
  // timings leaves them out: 6 to 11% on 30 us decodes).
  const int rounds = std::max(1, request.options.rounds);
  ProfileOptions turn = request.options;
  turn.rounds = 1;
  turn.min_repetitions = (request.options.min_repetitions + rounds - 1) / rounds;
  turn.max_repetitions = std::max(turn.min_repetitions, request.options.max_repetitions / rounds);
  turn.min_time_s = request.options.min_time_s / rounds;
  Load load(model, small, grid, request.busy_threads);
  std::vector<std::vector<std::vector<double>>> turns;  // per item, each turn's timings
  ServingProfile p;
  for (int round = 0; round < rounds; ++round) {
    Bench bench = make_bench(model, small, grid);
    if (round == 0)
      for (const std::unique_ptr<Item>& item : bench.items) p.samples.push_back(item->sample);
    std::vector<TimedRun> runs;
    for (const std::unique_ptr<Item>& item : bench.items)
      runs.push_back([&bench, it = item.get()] { return std::vector<double>{bench.run(*it)}; });
    load.start();
    const auto mine = repeat_interleaved(turn, 1, runs);
    load.stop();
    turns.resize(mine.size());
    for (size_t k = 0; k < mine.size(); ++k) turns[k].push_back(mine[k][0]);
    if (request.after_round) request.after_round();
  }
  for (size_t k = 0; k < p.samples.size(); ++k) p.samples[k].time_s = median_of_turn_means(turns[k]);
  for (const Layer& layer : small.layers) {
    if (layer.kind == LayerKind::Mtp) continue;
    ServingKindRates k{profile_kind(c, layer), layer_shape(c, layer), {}};
    std::vector<ServingSample> mine;
    for (const ServingSample& s : p.samples)
      if (s.kind == k.kind) mine.push_back(s);
    k.rates = fit_serving_rates(mine);
    p.kinds.push_back(k);
  }
  return p;
}

WorkEstimate cpu_serving_profile_estimate(const Model& model, int busy_threads) {
  check_cpu_model(model);
  const Model small = one_block_per_kind(model);
  const TransformerConfig& t = *small.transformer;
  double copies = 0;  // parameters, over the layers make_bench builds
  for (const Layer& l : small.layers)
    if (l.kind != LayerKind::Mtp) copies += copies_of(model, profile_kind(t, l)) * layer_parameters(t, l.kind, l.block, 1).total();
  WorkEstimate w;
  w.work = fmt::format("the serving profile's float32 copies of each kind of layer of '{}' ({} parameters, {} thread{})",
                       model.name, format_count(copies), busy_threads + 1, busy_threads > 0 ? "s" : "");
  w.bytes = 4.0 * copies * (busy_threads + 1);
  w.fix = "profile a smaller model (the cpu backend is for the tiny examples)";
  return w;
}

Profile profile_cpu_for_serving(const Model& model, const ServingProfileRequest& request) {
  Profile p;
  p.tool = fmt::format("pipewright {} profiler (cpu)", kVersion);
  p.machine = cpu_machine_info();
  p.model = profiled_model_of(model);
  p.serving = profile_cpu_serving(model, request);
  // The serving runtime moves each batch's hidden states between stages (no copy): its link is the hand-over.
  LinkProfile handover;
  handover.latency_s = stage_handover_s(200);
  handover.bandwidth_bytes_per_s = kMovedBytesPerSecond;
  handover.samples.push_back({0, handover.latency_s});
  p.links.push_back(handover);
  return p;
}

std::vector<ServingStep> sample_steps(const std::vector<ServingStep>& steps, int count) {
  std::vector<ServingStep> out;
  const size_t n = steps.size(), k = std::min(n, static_cast<size_t>(std::max(count, 1)));
  for (size_t i = 0; i < k; ++i) out.push_back(steps[k == 1 ? 0 : i * (n - 1) / (k - 1)]);
  return out;
}

ServingProfileRequest quick_serving_request(std::vector<ServingStep> batches, int busy_threads) {
  ServingProfileRequest r;
  r.busy_threads = busy_threads;
  r.batches = std::move(batches);
  r.options.warmup = 1;
  r.options.min_repetitions = 10;
  r.options.max_repetitions = 2000;
  r.options.min_time_s = 0.03;
  r.options.rounds = 5;
  return r;
}

}  // namespace pw
