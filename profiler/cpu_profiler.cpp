#include "profiler/cpu_profiler.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/kept_bytes.hpp"
#include "core/layer_work.hpp"
#include "core/version.hpp"
#include "executor/cpu_model.hpp"
#include "executor/host_tensor.hpp"
#include "executor/machine_load.hpp"
#include "executor/transport.hpp"
#include "profiler/link_line.hpp"

namespace pw {
namespace {

using ProfClock = std::chrono::steady_clock;

double seconds(ProfClock::time_point a, ProfClock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

Model one_block(const Model& model) {
  check_cpu_model(model);
  return one_block_per_kind(model);
}

// The softmax rebuild a block's B starts with under selective recomputation, on random Q and K of the
// block's shape.
PhaseTiming time_selective_recompute(const TransformerConfig& c, int b, int seq, const ProfileOptions& options) {
  const Eigen::Index n = static_cast<Eigen::Index>(b) * seq;
  const Mat q = random_matrix(n, static_cast<Eigen::Index>(c.heads) * c.head_dim, 4);
  const Mat k = random_matrix(n, static_cast<Eigen::Index>(c.kv_heads) * c.head_dim, 5);
  const ops::AttentionShape shape{b, seq, c.heads, c.kv_heads, c.head_dim};
  auto samples = repeat_phases(options, 1, [&] {
    const auto t0 = ProfClock::now();
    const Mat probs = ops::attention_probs(q, k, shape);
    return std::vector<double>{seconds(t0, ProfClock::now())};
  });
  return timing_of(samples[0]);
}

}  // namespace

PhaseTiming timing_of(std::vector<double>& s) {
  PhaseTiming t;
  if (s.empty()) return t;
  std::sort(s.begin(), s.end());
  auto at = [&](double q) { return s[static_cast<size_t>(std::lround(q * static_cast<double>(s.size() - 1)))]; };
  const size_t n = s.size();
  t.median_s = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  t.p10_s = at(0.1);
  t.p90_s = at(0.9);
  t.repetitions = static_cast<int>(n);
  return t;
}

int pass_copies(const Model& model, int micro_batch_size, int seq_len) {
  const Model one = one_block_per_kind(model);
  const TransformerConfig& c = *one.transformer;
  double copy_bytes = 0;
  Workload w;
  w.micro_batch_size = std::max(1, micro_batch_size);
  w.seq_len = std::max(1, seq_len);
  for (const Layer& layer : one.layers) {
    if (layer.kind != LayerKind::Block) continue;
    const KeptBytes k = cpu_kept_bytes(c, layer.kind, layer.block, w.micro_batch_size, w.seq_len, Recompute::None);
    copy_bytes += 2 * kFloatBytes * layer_work(one, layer, w).parameters + k.after_forward + k.after_backward + k.output;
  }
  const int most = std::max(1, model.transformer->layers / std::max(1, c.layers));
  if (!(copy_bytes > 0)) return most;
  return static_cast<int>(std::clamp(std::ceil(kCacheEvictionBytes / copy_bytes), 1.0, static_cast<double>(most)));
}

std::vector<LayerProfile> profile_cpu_layers(const Model& model, const std::vector<int>& micro_batch_sizes, int seq_len,
                                             const ProfileOptions& options) {
  const Model small = one_block(model);
  const TransformerConfig& c = *small.transformer;
  if (seq_len < 1) throw_bad_input("--seq-len: must be at least 1, got {}", seq_len);
  if (c.learned_positions && seq_len > c.max_seq_len)
    throw_bad_input("--seq-len: {} exceeds the {} learned positions of '{}'; use --seq-len {} or less", seq_len,
                    c.max_seq_len, model.name, c.max_seq_len);
  // A pass per micro-batch size, each one item of an interleaved measurement (so a machine that speeds up or
  // slows down moves every size alike). A pass runs as a pipeline stage does: F of every layer in order, then
  // B in reverse, then W in reverse, over copies of the blocks (pass_copies), each layer timed in each phase.
  // Timed alone and again and again, a small block kept its weights in a core's caches and ran faster than in
  // a run, where other layers' (and on shared cores, other ranks') work comes between two runs of it.
  struct Pass {
    int micro_batch_size = 0;
    Model model;
    std::unique_ptr<CpuModel> m;
    MicroBatch mb;
    Mat x, dy;
    std::vector<LayerProfile> kinds;  // per layer of one_block's, in its order
    std::vector<int> kind_of;         // per layer of the pass: its index in `kinds`
  };
  std::vector<Pass> passes;
  for (int b : micro_batch_sizes) {
    if (b < 1) throw_bad_input("--micro-batch-size: must be at least 1, got {}", b);
    const Eigen::Index n = static_cast<Eigen::Index>(b) * seq_len;
    Pass p;
    p.micro_batch_size = b;
    p.model = blocks_per_kind_copies(model, pass_copies(model, b, seq_len));
    p.m = std::make_unique<CpuModel>(p.model, 1);
    p.mb = synthetic_microbatch(1, 0, 0, b, seq_len, c.vocab);
    p.x = random_matrix(n, c.hidden, 2);
    p.dy = random_matrix(n, c.hidden, 3);
    for (const Layer& layer : small.layers) {
      LayerProfile lp;
      lp.kind = profile_kind(c, layer);
      lp.shape = layer_shape(c, layer);
      lp.micro_batch_size = b;
      lp.seq_len = seq_len;
      p.kinds.push_back(lp);
    }
    // Each pass layer's kind read from the pass model's own pattern (its dense and MoE blocks alternate).
    const TransformerConfig& pc = *p.model.transformer;
    for (const Layer& layer : p.model.layers) {
      const auto it = std::find_if(p.kinds.begin(), p.kinds.end(), [&](const LayerProfile& k) {
        return k.kind == profile_kind(pc, layer) && k.shape == layer_shape(pc, layer);
      });
      if (it == p.kinds.end()) throw_runtime("profile pass: layer {} of '{}' has no kind among one block's", layer.name, model.name);
      p.kind_of.push_back(static_cast<int>(it - p.kinds.begin()));
    }
    passes.push_back(std::move(p));
  }
  // One phase per layer and F, B or W: the passes' layer counts differ (copies by micro-batch size), so each
  // pass returns as many as the longest, the rest 0.
  size_t phases = 0;
  for (const Pass& p : passes) phases = std::max(phases, 3 * static_cast<size_t>(p.model.num_layers()));
  std::vector<TimedRun> runs;
  for (Pass& p : passes)
    runs.push_back([&p, phases] {
      const int layers = p.model.num_layers();
      std::vector<StageContext> ctx(static_cast<size_t>(layers));
      std::vector<double> t(phases, 0.0);
      // Each layer runs on the pass's own inputs: the timing is the layer's, whatever its neighbours return.
      for (int i = 0; i < layers; ++i) {
        const auto t0 = ProfClock::now();
        const Mat y = p.m->forward(LayerRange{i, i}, p.x, p.mb, ctx[static_cast<size_t>(i)]);
        t[3 * static_cast<size_t>(i)] = seconds(t0, ProfClock::now());
        LayerProfile& k = p.kinds[static_cast<size_t>(p.kind_of[static_cast<size_t>(i)])];
        k.activation_bytes = ctx[static_cast<size_t>(i)].bytes();
        k.output_bytes = k.kind == "head" ? 0 : bytes_of(y);
      }
      for (int i = layers - 1; i >= 0; --i) {
        const auto t0 = ProfClock::now();
        p.m->backward_input(LayerRange{i, i}, p.dy, ctx[static_cast<size_t>(i)], 1.0, /*defer_weights=*/true);
        t[3 * static_cast<size_t>(i) + 1] = seconds(t0, ProfClock::now());
        p.kinds[static_cast<size_t>(p.kind_of[static_cast<size_t>(i)])].weight_grad_bytes = ctx[static_cast<size_t>(i)].bytes();
      }
      for (int i = layers - 1; i >= 0; --i) {
        const auto t0 = ProfClock::now();
        p.m->backward_weight(ctx[static_cast<size_t>(i)]);
        t[3 * static_cast<size_t>(i) + 2] = seconds(t0, ProfClock::now());
      }
      return t;
    });
  std::vector<LayerProfile> out;
  const std::vector<std::vector<std::vector<double>>> samples =
      repeat_interleaved(options, static_cast<int>(phases), runs);
  for (size_t k = 0; k < passes.size(); ++k) {
    Pass& p = passes[k];
    // Every copy's runs are samples of its kind.
    std::vector<std::array<std::vector<double>, 3>> by_kind(p.kinds.size());
    for (size_t i = 0; i < p.kind_of.size(); ++i)
      for (size_t phase = 0; phase < 3; ++phase) {
        const std::vector<double>& runs_of = samples[k][3 * i + phase];
        std::vector<double>& into = by_kind[static_cast<size_t>(p.kind_of[i])][phase];
        into.insert(into.end(), runs_of.begin(), runs_of.end());
      }
    for (size_t j = 0; j < p.kinds.size(); ++j) {
      LayerProfile lp = p.kinds[j];
      lp.forward = timing_of(by_kind[j][0]);
      lp.backward_input = timing_of(by_kind[j][1]);
      lp.backward_weight = timing_of(by_kind[j][2]);
      if (lp.kind == "block" || lp.kind == "moe-block")
        lp.selective_recompute = time_selective_recompute(c, lp.micro_batch_size, seq_len, options);
      out.push_back(lp);
    }
  }
  return out;
}

double profile_cpu_optimizer(const Model& model, const ProfileOptions& options) {
  // Adam streams each parameter's value, gradient and two moments: over one block they stay in the caches
  // and it runs twice as fast as over a stage's blocks, which do not. So the step is timed over as many
  // blocks as the model has, up to kOptimizerStateCapBytes of that state (a stage of a large model is past
  // every cache long before that).
  constexpr double kStateBytesPerParameter = 4 * sizeof(float);
  const Model one = one_block(model);
  // Counted, not built: making the embedding and the head of a large vocabulary takes a minute.
  const double block_parameters = layer_work(one, one.layers[1], Workload{}).parameters;
  const double state_per_block = block_parameters * kStateBytesPerParameter;
  const int blocks = std::clamp(static_cast<int>(kOptimizerStateCapBytes / state_per_block), 1, model.transformer->layers);
  TransformerConfig c = *one.transformer;
  c.layers = blocks;
  CpuModel m(make_transformer_model(model.name, c), 1);
  const std::vector<Param*> params = m.params(LayerRange{1, blocks});
  double count = 0;
  for (const Param* p : params) count += static_cast<double>(p->value.size());
  const OptimizerConfig adam{OptimizerKind::Adam, 1e-6};
  // In a run a whole iteration's forward and backward passes come between two steps and leave the state out
  // of the caches: so each timed step starts after kCacheEvictionBytes have been written. Stepped back to back
  // it runs twice as fast as in the runs (8 tiny-llama blocks on a 2-core VM: 1.28 ms per million parameters
  // back to back, 2.80 after the writes, 2.77 measured in `run`'s optimizer steps).
  std::vector<char> eviction(static_cast<std::size_t>(kCacheEvictionBytes), 0);
  auto samples = repeat_phases(options, 1, [&] {
    for (std::size_t k = 0; k < eviction.size(); k += 64) ++eviction[k];
    const auto t0 = ProfClock::now();
    optimizer_step(adam, params);
    return std::vector<double>{seconds(t0, ProfClock::now())};
  });
  return timing_of(samples[0]).median_s / count;
}

std::vector<double> default_link_sizes() {
  std::vector<double> sizes;
  for (double s = 1024; s <= 64.0 * 1024 * 1024; s *= 4) sizes.push_back(s);
  return sizes;
}

namespace {

// One-way times of `bytes` between two rank threads over `transport` (the first round trip warms the pages
// up and is left out): `repetitions` round trips, each halved. With `turns` (which `transport` takes), the two
// sides take turns on its cores as the runtime's rank threads do (recv_taking_turns). Both sides run on threads
// of their own: a turn binds its holder to a CPU, and the caller, who starts a run's rank threads next, must
// not pass a binding on to them.
std::vector<double> one_way_times(ThreadTransport& transport, double bytes, int repetitions, int& key,
                                  int echo_core = -1, CoreTurns* turns = nullptr) {
  const auto deadline = [] { return Clock::now() + std::chrono::seconds(60); };
  const std::atomic<bool> stop{false};
  // A side's receive, holding its turn (if any) afterwards.
  const auto receive = [&](CoreTurn& turn, int dst, int src, const MessageKey& k) {
    if (!turns) return transport.recv(dst, src, k, deadline());
    Message m = transport.recv_taking_turns(dst, src, k, deadline(), turn, stop);
    turn.hold(deadline());
    return m;
  };
  const auto floats = static_cast<Eigen::Index>(std::ceil(bytes / 4.0));
  const TensorPtr tensor = std::make_shared<HostTensor>(Mat::Zero(1, floats));
  std::vector<double> one_way;
  const int first = key;
  const int rounds = repetitions + 1;
  std::thread echo([&] {
    if (echo_core >= 0) bind_this_thread(echo_core);
    CoreTurn turn(turns);
    for (int i = 0; i < rounds; ++i) {
      Message m = receive(turn, 1, 0, MessageKey{first + i, Op::SendF, 0, 0});
      transport.send(1, 0, MessageKey{first + i, Op::SendB, 1, 0}, std::move(m));
    }
  });
  std::thread measure([&] {
    CoreTurn turn(turns);
    turn.hold(deadline());
    for (int i = 0; i < rounds; ++i) {
      const auto t0 = ProfClock::now();
      transport.send(0, 1, MessageKey{first + i, Op::SendF, 0, 0}, Message{tensor, Clock::now(), -1});
      receive(turn, 0, 1, MessageKey{first + i, Op::SendB, 1, 0});
      if (i > 0) one_way.push_back(seconds(t0, ProfClock::now()) / 2);
    }
  });
  measure.join();
  echo.join();
  key += rounds;
  return one_way;
}

}  // namespace

LinkProfile profile_thread_link(const std::vector<double>& sizes, int repetitions) {
  LinkProfile link;
  link.src = 0;
  link.dst = 1;
  ThreadTransport transport(2);
  int key = 0;
  for (double bytes : sizes) {
    std::vector<double> one_way = one_way_times(transport, bytes, repetitions, key);
    link.samples.push_back({std::ceil(bytes / 4.0) * 4.0, timing_of(one_way).median_s});
  }
  fit_link(link);
  return link;
}

double profile_thread_wakeup(int repetitions) {
  const std::vector<int> cores = usable_core_ids();
  if (cores.size() < 2) return 0;  // one core: a woken thread only ever waits for it
  double wakeup = 0;
  // On a thread of its own, bound to the first core, with the receiver bound to the second: so the receiver
  // sleeps on a core left idle, where the OS must wake it (two unbound threads often share a core, and that
  // hand-over is a switch on one core, not a wake-up).
  std::thread measure([&] {
    bind_this_thread(cores[0]);
    ThreadTransport spinning(2), sleeping(2, /*spin=*/false);
    int key = 0;
    std::vector<double> as_linked = one_way_times(spinning, kWakeupMessageBytes, repetitions, key);
    std::vector<double> asleep = one_way_times(sleeping, kWakeupMessageBytes, repetitions, key, cores[1]);
    wakeup = std::max(0.0, timing_of(asleep).median_s - timing_of(as_linked).median_s);
  });
  measure.join();
  return wakeup;
}

double profile_turn_handover(int repetitions) {
  ThreadTransport spinning(2);
  int key = 0;
  std::vector<double> as_linked = one_way_times(spinning, kWakeupMessageBytes, repetitions, key);
  CoreTurns turns(1);
  ThreadTransport in_turns(2, /*spin=*/false);
  in_turns.take_turns(&turns);
  std::vector<double> handed = one_way_times(in_turns, kWakeupMessageBytes, repetitions, key, -1, &turns);
  return std::max(0.0, timing_of(handed).median_s - timing_of(as_linked).median_s);
}

MachineInfo cpu_machine_info() {
  MachineInfo m;
  m.backend = "cpu";
  m.cores = static_cast<int>(std::thread::hardware_concurrency());
  m.threads_per_rank = 1;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      const size_t start = colon == std::string::npos ? std::string::npos : line.find_first_not_of(' ', colon + 1);
      if (start != std::string::npos) m.device = line.substr(start);
      break;
    }
  if (m.device.empty()) m.device = "unknown CPU";
  return m;
}

}  // namespace pw

namespace pw {

Profile profile_cpu(const Model& model, const CpuProfileRequest& r) {
  Profile p;
  p.tool = fmt::format("pipewright {} profiler (cpu)", kVersion);
  p.machine = cpu_machine_info();
  p.model = profiled_model_of(model);
  const int seq = r.seq_len > 0 ? r.seq_len : model.default_seq_len();
  p.layers = profile_cpu_layers(model, r.micro_batch_sizes, seq, r.options);
  p.optimizer_s_per_parameter = profile_cpu_optimizer(model, r.options);
  p.links.push_back(profile_thread_link(r.link_sizes, r.link_repetitions));
  p.machine.wakeup_s = profile_thread_wakeup(kWakeupRepetitions);
  p.machine.handover_s = profile_turn_handover(kWakeupRepetitions);
  return p;
}

CpuProfileRequest quick_profile_request(int micro_batch_size, int seq_len) {
  CpuProfileRequest r;
  r.micro_batch_sizes = {micro_batch_size};
  r.seq_len = seq_len;
  r.options.warmup = 1;
  r.options.min_repetitions = 5;
  r.options.max_repetitions = 200;
  r.options.min_time_s = 0.02;
  r.link_sizes.clear();
  for (double s = 1024; s <= 1024.0 * 1024; s *= 4) r.link_sizes.push_back(s);
  r.link_repetitions = 5;
  return r;
}

}  // namespace pw
