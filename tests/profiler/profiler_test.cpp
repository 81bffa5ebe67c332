// The profile format, the link fit, the CPU layer profiler and the profiled cost model.
#include <catch2/catch.hpp>

#include <limits>
#include <thread>

#include <pthread.h>
#include <sched.h>

#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "executor/machine_load.hpp"
#include "profiler/cpu_profiler.hpp"
#include "profiler/link_line.hpp"
#include "profiler/profile.hpp"
#include "profiler/profiled_cost_model.hpp"
#include "sim/scenario.hpp"
#include "../executor/executor_test_util.hpp"
#include "fixed_timing.hpp"

using namespace pw;

namespace {

// The executor tests' Llama-style model: what the profiler times is what the executor runs.
Model tiny(int layers = 2) { return test::tiny_llama(layers); }

// Embedding free, each block F = 1 ms, B = 2 ms, W = 3 ms, head free; at micro-batch size 1, length 8.
Profile uniform_profile(const Model& m) {
  Profile p;
  p.tool = "test";
  p.machine = MachineInfo{"cpu", "test CPU", 2, 1};
  for (LayerKind k : {LayerKind::Embedding, LayerKind::Block, LayerKind::Head}) {
    LayerProfile l;
    l.kind = layer_kind_name(k);
    l.shape = layer_shape(*m.transformer, k);
    l.micro_batch_size = 1;
    l.seq_len = 8;
    const bool block = k == LayerKind::Block;
    l.forward = fixed(block ? 1e-3 : 0);
    l.backward_input = fixed(block ? 2e-3 : 0);
    l.backward_weight = fixed(block ? 3e-3 : 0);
    l.activation_bytes = 100;
    p.layers.push_back(l);
  }
  p.links.push_back(LinkProfile{0, 1, 1e-5, 1e9, {{1024, 1.1e-5}}});
  p.optimizer_s_per_parameter = 1e-9;
  return p;
}

// The message reading `text` as a profile gives (BadInput), or "no error".
std::string error(const std::string& text) {
  try {
    profile_from_json_text(text, "p.json");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    return std::string(e.what());
  }
  return std::string("no error");
}

}  // namespace

TEST_CASE("a profile survives its JSON round trip") {
  Profile p = uniform_profile(tiny());
  p.machine.wakeup_s = 2.75e-5;
  p.machine.handover_s = 4.5e-6;
  const Profile q = profile_from_json_text(profile_to_json_text(p), "p.json");
  CHECK(profile_to_json_text(q) == profile_to_json_text(p));
  CHECK(q.machine.wakeup_s == 2.75e-5);
  CHECK(q.machine.handover_s == 4.5e-6);
  REQUIRE(q.layers.size() == 3);
  CHECK(q.layers[1].kind == "block");
  CHECK(q.layers[1].shape ==
        "hidden=16 heads=4 kv_heads=2 head_dim=4 ffn=24 mlp=swiglu norm=rmsnorm bias=none positions=rotary");
  CHECK(q.layers[1].backward_weight.median_s == 3e-3);
  CHECK(q.links[0].bandwidth_bytes_per_s == 1e9);
  CHECK(q.find("block", q.layers[1].shape, 1, 8) == &q.layers[1]);
  CHECK(q.find("block", q.layers[1].shape, 2, 8) == nullptr);
  // A CPU profile has no collectives and writes no "collectives" field.
  CHECK(q.collectives.empty());
  CHECK(profile_to_json_text(p).find("collectives") == std::string::npos);

  // Collectives (the CUDA profiler's) come back as written.
  Profile with = p;
  with.collectives.push_back(CollectiveProfile{CollectiveKind::AllReduce, 8, 1 << 30, 5.5e-3, LinkSpec{450e9, 3e-6}});
  with.collectives.push_back(CollectiveProfile{CollectiveKind::ReduceScatter, 4, 1 << 20, 4e-5, LinkSpec{450e9, 3e-6}});
  const Profile back = profile_from_json_text(profile_to_json_text(with), "p.json");
  CHECK(profile_to_json_text(back) == profile_to_json_text(with));
  REQUIRE(back.collectives.size() == 2);
  CHECK(back.collectives[0].kind == CollectiveKind::AllReduce);
  CHECK(back.collectives[0].ranks == 8);
  CHECK(back.collectives[0].bytes == 1 << 30);
  CHECK(back.collectives[1].kind == CollectiveKind::ReduceScatter);
  CHECK(back.collectives[1].link.bandwidth_bytes_per_s == 450e9);
  CHECK(back.collectives[1].link.latency_s == 3e-6);
}

TEST_CASE("malformed profiles name the file and the field") {
  CHECK(error(R"({"format": "x", "version": 1, "layers": []})") ==
        "p.json: format must be \"pipewright-profile\"; is this a profile written by `pipewright profile`?");
  CHECK(error(R"({"format": "pipewright-profile", "version": 1, "layers": [{"kind": "mlp"}]})") ==
        "p.json: layers[0].kind must be \"embedding\", \"block\", \"moe-block\" or \"head\", got \"mlp\"");
  const std::string head = R"({"format": "pipewright-profile", "version": 1, "layers": [], "collectives": [)";
  const std::string link = R"("link": {"bandwidth_bytes_per_s": 1e11, "latency_s": 0}})";
  CHECK(error(head + R"({"kind": "all_to_all", "ranks": 4, "bytes": 1e6, "time_s": 1e-4, )" + link + "]}") ==
        "p.json: collectives[0].kind is \"all_to_all\"; give \"all_reduce\", \"all_gather\" or \"reduce_scatter\"");
  CHECK(error(head + R"({"kind": "all_gather", "ranks": 1, "bytes": 1e6, "time_s": 1e-4, )" + link + "]}") ==
        "p.json: collectives[0].ranks is 1; a collective needs 2 GPUs or more");
  CHECK(error(head + R"({"kind": "all_gather", "ranks": 2, "bytes": 1e6, "time_s": 1e-4}]})") ==
        "p.json: missing required field 'collectives[0].link'");
}

TEST_CASE("the link fit recovers latency and bandwidth") {
  LinkProfile l;
  for (double bytes : default_link_sizes()) l.samples.push_back({bytes, 5e-6 + bytes / 2e9});
  fit_link(l);
  CHECK(l.latency_s == Approx(5e-6).epsilon(1e-9));
  CHECK(l.bandwidth_bytes_per_s == Approx(2e9).epsilon(1e-9));
  // Samples that put the intercept below zero are fitted through the origin.
  LinkProfile m;
  m.samples = {{1000, 1e-7}, {2000, 3e-7}};
  fit_link(m);
  CHECK(m.latency_s == 0);
  CHECK(m.bandwidth_bytes_per_s > 0);
}

TEST_CASE("the link fit lets the large messages decide where the small ones are noise") {
  // A busy machine's thread hand-over: the first sizes waited 60 down to 5 us for a core, then 300 us for
  // 1 MiB up to 20 ms for 64 MiB. Weighted by 1 / time^2 the small sizes' noise gives a falling line;
  // the plain fit, here through the origin (its free intercept is below zero), gives the copy's rate.
  LinkProfile l;
  const std::vector<double> times{60e-6, 40e-6, 20e-6, 10e-6, 5e-6, 300e-6, 1.2e-3, 5e-3, 20e-3};
  const std::vector<double> sizes = default_link_sizes();
  REQUIRE(sizes.size() == times.size());
  double sxx = 0, sxt = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    l.samples.push_back({sizes[i], times[i]});
    sxx += sizes[i] * sizes[i];
    sxt += sizes[i] * times[i];
  }
  fit_link(l);
  CHECK(l.latency_s == 0);
  CHECK(l.bandwidth_bytes_per_s == Approx(sxx / sxt).epsilon(1e-12));
  CHECK(l.bandwidth_bytes_per_s == Approx(3.356e9).epsilon(1e-3));
  CHECK_FALSE(l.bandwidth_bounded);
  // Times that do not grow with the size at all (a thread hand-over waiting ~1 ms for a core whatever it
  // carries) bound the bandwidth instead: the mean time is the latency and the largest message's bytes over
  // its time the bandwidth, never an infinite one, which the profile file could not hold.
  LinkProfile flat;
  flat.samples = {{1024, 996e-6}, {65536, 1.1e-3}, {1 << 20, 708e-6}};
  fit_link(flat);
  CHECK(flat.bandwidth_bounded);
  CHECK(flat.latency_s == Approx((996e-6 + 1.1e-3 + 708e-6) / 3).epsilon(1e-12));
  CHECK(flat.bandwidth_bytes_per_s == Approx((1 << 20) / 708e-6).epsilon(1e-12));
  CHECK(link_fit_text(flat) ==
        "fit: latency 935 us + size / 1.48 GB/s (at least: the time did not grow with the size, so the latency is the "
        "mean time; measure again with more --link-repetitions on a quieter machine for a fit)");
  CHECK(link_fit_text(l) == "fit: latency 0 s + size / 3.36 GB/s");
  // Written and read back, the bound is a plain link: the file holds the figures, not how they were found.
  Profile p;
  p.links = {flat};
  const Profile q = profile_from_json_text(profile_to_json_text(p), "p.json");
  REQUIRE(q.links.size() == 1);
  CHECK(q.links[0].bandwidth_bytes_per_s == flat.bandwidth_bytes_per_s);
  CHECK(q.links[0].latency_s == flat.latency_s);
  // An infinite figure is never written: it would read back as a missing field.
  p.links[0].bandwidth_bytes_per_s = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(profile_to_json_text(p), Catch::Contains("profile: links[0].bandwidth_bytes_per_s is not a finite number"));
}

TEST_CASE("median and spread of repeated timings") {
  std::vector<double> s{5, 1, 4, 2, 3, 9, 7, 8, 6, 10, 11};
  const PhaseTiming t = timing_of(s);
  CHECK(t.median_s == 6);
  CHECK(t.p10_s == 2);  // index round(0.1 x 10) = 1 of the sorted 1..11
  CHECK(t.p90_s == 10);
  CHECK(t.repetitions == 11);
}

TEST_CASE("the CPU profiler times every distinct layer and measures its bytes") {
  ProfileOptions o;
  o.warmup = 1;
  o.min_repetitions = 3;
  o.min_time_s = 0;
  const std::vector<LayerProfile> layers = profile_cpu_layers(tiny(5), {1, 2}, 8, o);
  REQUIRE(layers.size() == 6);
  const double h = 16;
  for (const LayerProfile& l : layers) {
    INFO(l.kind << " b " << l.micro_batch_size);
    // Three passes, each timing all 5 of the model's blocks (pass_copies) and the embedding and head once.
    CHECK(l.forward.repetitions == (l.kind == "block" ? 3 * 5 : 3));
    CHECK(l.forward.median_s > 0);
    CHECK(l.backward_weight.median_s > 0);
    const double n = 8.0 * l.micro_batch_size;
    // The output is a float per token and hidden unit; the head's is its loss, not sent.
    CHECK(l.output_bytes == (l.kind == "head" ? 0 : 4 * n * h));
    if (l.kind == "embedding") CHECK(l.activation_bytes == 4 * n);  // the token ids W needs
    if (l.kind == "block") CHECK(l.activation_bytes > l.output_bytes);
    // The softmax rebuild of selective recomputation is a block's alone.
    CHECK(l.selective_recompute.has_value() == (l.kind == "block"));
    if (l.selective_recompute) CHECK(l.selective_recompute->median_s > 0);
  }
  CHECK(layers[0].kind == "embedding");
  CHECK(layers[1].kind == "block");
  CHECK(layers[4].micro_batch_size == 2);
  CHECK(layers[4].activation_bytes == 2 * layers[1].activation_bytes);  // everything a block keeps scales with b
  CHECK(profile_cpu_optimizer(tiny(), o) > 0);
}

TEST_CASE("the thread link profile has one sample per size and a positive fit") {
  const LinkProfile l = profile_thread_link({1024, 65536, 1 << 20}, 2);
  REQUIRE(l.samples.size() == 3);
  for (const LinkSample& s : l.samples) CHECK(s.time_s > 0);
  CHECK(l.samples[2].bytes == 1 << 20);
  CHECK(l.bandwidth_bytes_per_s > 0);
  CHECK(l.latency_s >= 0);
}

TEST_CASE("the wake-up of a sleeping rank thread: measured across two cores, none on one") {
  // Bound to one core, the two threads of the measurement can only take turns on it: nothing to wake.
  double on_one_core = -1;
  bool bound = false;
  std::thread measure([&] {  // Catch's assertions stay on the test's own thread
    bound = bind_this_thread(sched_getcpu());
    if (bound) on_one_core = profile_thread_wakeup(20);
  });
  measure.join();
  REQUIRE(bound);
  CHECK(on_one_core == 0);
  const double wakeup = profile_thread_wakeup(20);
  CHECK(wakeup >= 0);
  CHECK(wakeup < 0.05);  // a wake-up, not OS time slices
}

TEST_CASE("a profile pass over an MoE model's copies times its dense and MoE blocks apart, every copy of each") {
  ProfileOptions o;
  o.warmup = 0;
  o.rounds = 1;
  o.min_repetitions = 2;
  o.min_time_s = 0;
  // One dense block then 5 MoE blocks: 5 copies of the (dense, MoE) pair, the dense ones copies too.
  const Model moe = test::tiny_moe(6);
  REQUIRE(pass_copies(moe, 1, 8) == 3);
  const std::vector<LayerProfile> layers = profile_cpu_layers(moe, {1}, 8, o);
  REQUIRE(layers.size() == 4);
  CHECK(layers[1].kind == "block");
  CHECK(layers[2].kind == "moe-block");
  for (const LayerProfile& l : layers) {
    INFO(l.kind);
    // Two passes, each timing the three copies of a block kind once, the embedding and the head once.
    CHECK(l.forward.repetitions == (l.kind == "block" || l.kind == "moe-block" ? 2 * 3 : 2));
    CHECK(l.backward_weight.repetitions == l.forward.repetitions);
  }
}

TEST_CASE("a turn handed between two rank threads on one core: measured, and a switch, not a time slice") {
  cpu_set_t before, after;
  pthread_getaffinity_np(pthread_self(), sizeof before, &before);
  const double handover = profile_turn_handover(20);
  CHECK(handover >= 0);
  CHECK(handover < 0.05);  // a switch on one core, not OS time slices
  // Measured on threads of its own: the caller, who starts a run's rank threads next, may still run anywhere.
  pthread_getaffinity_np(pthread_self(), sizeof after, &after);
  CHECK(CPU_EQUAL(&before, &after));
}

TEST_CASE("the profiled cost model uses the profile where it matches and the fallback elsewhere") {
  const Model m = tiny(4);
  const AnalyticCostModel analytic;
  Workload w;
  w.micro_batch_size = 1;
  w.seq_len = 8;
  const ProfiledCostModel profiled(uniform_profile(m), m, analytic);
  const Layer& block = m.layers[1];
  const LayerWork work = layer_work(m, block, w);
  GpuSpec gpu{"g", 1e15, 80e9, 3e12};
  CHECK(profiled.phase_time(block, work, Phase::Forward, gpu, {}, 1) == 1e-3);
  CHECK(profiled.phase_time(block, work, Phase::BackwardInput, gpu, {}, 1) == 2e-3);
  CHECK(profiled.phase_time(block, work, Phase::BackwardWeight, gpu, {}, 1) == 3e-3);
  CHECK(profiled.p2p_link(LinkSpec{5e11, 1e-6}).bandwidth_bytes_per_s == 1e9);
  // Between nodes: not what a profile of one node measured.
  CHECK(profiled.p2p_link(LinkSpec{5e10, 5e-6, true}).bandwidth_bytes_per_s == analytic.p2p_link(LinkSpec{5e10, 5e-6, true}).bandwidth_bytes_per_s);
  CHECK(profiled.optimizer_step_time(1e6, gpu, {}) == Approx(1e-3));
  // Another micro-batch size is not in the profile: the same model asks the analytic one for it.
  Workload w2 = w;
  w2.micro_batch_size = 2;
  const LayerWork work2 = layer_work(m, block, w2);
  CHECK(profiled.phase_time(block, work2, Phase::Forward, gpu, {}, 1) ==
        analytic.phase_time(block, work2, Phase::Forward, gpu, {}, 1));
  CHECK(profiled.entry_for(block, 2, 8) == nullptr);
  CHECK(profiled.entry_for(block, 1, 8) != nullptr);
  // tp > 1: the profile is of one device.
  CHECK(profiled.phase_time(block, work, Phase::Forward, gpu, LinkSpec{1e11, 1e-6}, 2) ==
        analytic.phase_time(block, work, Phase::Forward, gpu, LinkSpec{1e11, 1e-6}, 2));
}

namespace {

// tiny(4) on the ideal cluster, pp 2 under gpipe, 2 micro-batches of 8 tokens, two blocks a stage.
Scenario two_stages_of_two_blocks() {
  Scenario s;
  s.model = tiny(4);
  s.cluster = cluster_preset("ideal");
  s.parallel.pp = 2;
  s.parallel.microbatches = 2;
  s.workload.seq_len = 8;
  s.schedule = "gpipe";
  s.split = {2, 2};
  return s;
}

}  // namespace

TEST_CASE("a scenario evaluated with the profile gets the profiled stage times") {
  const Scenario s = two_stages_of_two_blocks();
  const AnalyticCostModel analytic;
  const ProfiledCostModel profiled(uniform_profile(s.model), s.model, analytic);
  const Evaluation ev = evaluate(s, profiled);
  for (const StageReport& st : ev.stages) {
    CHECK(st.cost.forward_s == Approx(2e-3));  // two blocks of 1 ms
    CHECK(st.cost.backward_input_s == Approx(4e-3));
    CHECK(st.cost.backward_weight_s == Approx(6e-3));
  }
  // gpipe on the ideal cluster: (m + p - 1)(F + B + W) = 3 x 12 ms, plus the slowest optimizer step.
  CHECK(ev.sim.step_time_s == Approx(0.036).epsilon(1e-3));
}

TEST_CASE("a measured runtime's time per call is charged once to every action, a full backward included") {
  // The same profile with and without pipewright.torch.profile's "runtime" (torch.distributed.pipelining's
  // time per compute call, 0.2 ms): F, B and W each grow by it, a BW (one stage_backward call) by it once.
  const Scenario s = two_stages_of_two_blocks();
  const AnalyticCostModel analytic;
  Profile measured = uniform_profile(s.model);
  measured.runtime = RuntimeProfile{"torch.distributed.pipelining 2.15.0", 2e-4, 1.5e-4};
  const Profile back = profile_from_json_text(profile_to_json_text(measured), "p.json");
  REQUIRE(back.runtime.has_value());
  CHECK(back.runtime->name == "torch.distributed.pipelining 2.15.0");
  CHECK(back.runtime->action_s == 2e-4);
  CHECK(back.runtime->transfer_s == 1.5e-4);
  CHECK(profile_to_json_text(back) == profile_to_json_text(measured));
  CHECK(profile_to_json_text(uniform_profile(s.model)).find("runtime") == std::string::npos);

  const ProfiledCostModel without(uniform_profile(s.model), s.model, analytic);
  const ProfiledCostModel with(back, s.model, analytic);
  CHECK(without.action_overhead_s() == 0);
  CHECK_FALSE(without.full_backward_one_action());
  CHECK(with.action_overhead_s() == 2e-4);
  CHECK(with.full_backward_one_action());
  CHECK(with.transfer_post_s() == 1.5e-4);
  CHECK(without.transfer_post_s() == 0);
  // The time per call alone (posting transfers is the simulator's, tests/sim/comm_test.cpp).
  Profile calls_only = back;
  calls_only.runtime->transfer_s = 0;
  const ProfiledCostModel per_call(calls_only, s.model, analytic);
  const Evaluation a = evaluate(s, without), b = evaluate(s, per_call);
  REQUIRE(a.stages.size() == b.stages.size());
  for (size_t i = 0; i < a.stages.size(); ++i) {
    const StageCost &x = a.stages[i].cost, &y = b.stages[i].cost;
    CHECK(y.forward_s == Approx(x.forward_s + 2e-4));
    CHECK(y.backward_input_s == Approx(x.backward_input_s + 2e-4));
    CHECK(y.backward_weight_s == Approx(x.backward_weight_s + 2e-4));
    CHECK(y.full_backward_s() == Approx(x.full_backward_s() + 2e-4));
  }
  // gpipe's F and full backward (BW) on the ideal cluster: (m + p - 1)(F + BW) = 3 x (12 ms + 2 x 0.2 ms).
  CHECK(b.sim.step_time_s - a.sim.step_time_s == Approx(3 * 4e-4).epsilon(1e-3));

  const std::string top = R"({"format": "pipewright-profile", "version": 1, "layers": [], "runtime": )";
  // A runtime without transfer_s posts in no time.
  const Profile older = profile_from_json_text(top + R"({"name": "torch", "action_s": 1e-4}})", "p.json");
  CHECK(older.runtime->transfer_s == 0);
  CHECK(error(top + R"({"name": "torch", "action_s": -1e-4}})") ==
        "p.json: runtime.action_s is -0.0001 s; give a figure from 0 to 1 s");
  CHECK(error(top + R"({"name": "torch", "action_s": 1e-4, "loop_s": 0}})") ==
        "p.json: unknown field 'runtime.loop_s'; known fields: name, action_s, transfer_s");
}

TEST_CASE("profiles: entry counts and figures are capped, numbers beyond a double named") {
  std::string many = R"({"format": "pipewright-profile", "version": 1, "layers": [0)";
  for (int i = 0; i < 100'000; ++i) many += ",0";
  CHECK(error(many + "]}") == "p.json: layers has 100001 layer entries, above the cap of 100000; give at most 100000");
  const std::string layer = R"({"format": "pipewright-profile", "version": 1, "layers": [{"kind": "block", "shape": "s",
      "micro_batch_size": 1, "seq_len": 8, "backward_input": {"median_s": 1, "repetitions": 3},
      "backward_weight": {"median_s": 1, "repetitions": 3}, "forward": )";
  CHECK(error(layer + R"({"median_s": 1e400, "repetitions": 3}}]})") ==
        "p.json: layers[0].forward.median_s is 1e400, beyond the range of a double (1.8e308); give a figure in the "
        "field's range");
  CHECK(error(layer + R"({"median_s": 1e9, "repetitions": 3}}]})") ==
        "p.json: layers[0].forward.median_s is 1000000000 s; give a figure from 0 to 1000000 s");
  CHECK(error(layer + R"({"median_s": 1, "repetitions": 1e12}}]})") ==
        "p.json: layers[0].forward.repetitions is 1000000000000 repetitions, above the cap of 1000000000; give at most "
        "1000000000");
}
