// One profiled cost model for every micro-batch size a search tries: the work it is asked about says which
// micro-batch, sequence length and recomputation to look up; what the profile lacks goes to the fallback, and
// coverage() says which layers came from where.
#include <catch2/catch.hpp>

#include "core/analytic_cost_model.hpp"
#include "profiler/cpu_profiler.hpp"
#include "profiler/profile.hpp"
#include "profiler/profiled_cost_model.hpp"
#include "sim/scenario.hpp"
#include "../executor/executor_test_util.hpp"
#include "fixed_timing.hpp"

using namespace pw;

namespace {

// Entries for embedding, block and head at micro-batch `b`, length 8: each phase b ms (F), 2b ms (B), 3b ms
// (W); the block's softmax rebuild b / 10 ms when `selective`.
void add_entries(Profile& p, const Model& m, int b, bool selective) {
  for (LayerKind k : {LayerKind::Embedding, LayerKind::Block, LayerKind::Head}) {
    LayerProfile l;
    l.kind = layer_kind_name(k);
    l.shape = layer_shape(*m.transformer, k);
    l.micro_batch_size = b;
    l.seq_len = 8;
    l.forward = fixed(b * 1e-3);
    l.backward_input = fixed(b * 2e-3);
    l.backward_weight = fixed(b * 3e-3);
    if (selective && k == LayerKind::Block) l.selective_recompute = fixed(b * 1e-4);
    p.layers.push_back(l);
  }
}

Workload workload(int b, Recompute r = Recompute::None, int tp = 1) {
  Workload w;
  w.micro_batch_size = b;
  w.recompute = r;
  w.tp = tp;
  return w;
}

const GpuSpec kGpu{"g", 1e15, 80e9, 3e12};

}  // namespace

TEST_CASE("layer_work records the micro-batch and recomputation it is for") {
  const Model m = test::tiny_llama(2);
  Workload w = workload(3, Recompute::Selective);
  const LayerWork lw = layer_work(m, m.layers[1], w);
  CHECK(lw.micro_batch_size == 3);
  CHECK(lw.seq_len == 8);  // the model's, as the workload leaves it 0
  CHECK(lw.recompute_mode == Recompute::Selective);
  w.seq_len = 4;
  CHECK(layer_work(m, m.layers.back(), w).seq_len == 4);
}

TEST_CASE("one profiled model answers each micro-batch size from its own entry") {
  const Model m = test::tiny_llama(2);
  Profile p;
  add_entries(p, m, 1, true);
  add_entries(p, m, 2, false);
  const AnalyticCostModel analytic;
  const ProfiledCostModel cost(p, m, analytic);
  const Layer& block = m.layers[1];
  auto time = [&](const Workload& w, Phase phase, int tp = 1) {
    return cost.phase_time(block, layer_work(m, block, w), phase, kGpu, LinkSpec{1e11, 1e-6}, tp);
  };
  auto analytic_time = [&](const Workload& w, Phase phase, int tp = 1) {
    return analytic.phase_time(block, layer_work(m, block, w), phase, kGpu, LinkSpec{1e11, 1e-6}, tp);
  };
  CHECK(time(workload(1), Phase::Forward) == 1e-3);
  CHECK(time(workload(2), Phase::Forward) == 2e-3);
  CHECK(time(workload(2), Phase::BackwardWeight) == 6e-3);
  // Full recomputation reruns F before B; selective rebuilds the softmax, measured at b = 1 only.
  CHECK(time(workload(1, Recompute::Full), Phase::BackwardInput) == Approx(2e-3 + 1e-3));
  CHECK(time(workload(1, Recompute::Selective), Phase::BackwardInput) == Approx(2e-3 + 1e-4));
  CHECK(time(workload(2, Recompute::Selective), Phase::BackwardInput) ==
        analytic_time(workload(2, Recompute::Selective), Phase::BackwardInput));
  // The profiled rebuild is of the attention core: selective recomputation of other modules is the analytic one's.
  Workload modules = workload(1, Recompute::Selective);
  modules.recompute_modules = recompute_modules_from_string("core_attn,layernorm");
  CHECK(time(modules, Phase::Forward) == analytic_time(modules, Phase::Forward));
  CHECK(time(modules, Phase::BackwardInput) == analytic_time(modules, Phase::BackwardInput));
  // Not profiled: micro-batch 4, and tp 2.
  CHECK(time(workload(4), Phase::Forward) == analytic_time(workload(4), Phase::Forward));
  CHECK(time(workload(1, Recompute::None, 2), Phase::Forward, 2) ==
        analytic_time(workload(1, Recompute::None, 2), Phase::Forward, 2));
  // The head recomputes nothing: profiled under selective recomputation even where the block is not.
  const Layer& head = m.layers.back();
  const Workload w2s = workload(2, Recompute::Selective);
  CHECK(cost.phase_time(head, layer_work(m, head, w2s), Phase::BackwardInput, kGpu, {}, 1) == 4e-3);
}

TEST_CASE("coverage names the layers the profile timed and why the others are not") {
  const Model m = test::tiny_llama(2);
  Profile p;
  add_entries(p, m, 1, false);
  const AnalyticCostModel analytic;
  const ProfiledCostModel cost(p, m, analytic);
  const ProfileCoverage all = cost.coverage(m, workload(1));
  CHECK(all.profiled == std::vector<std::string>{"embedding", "block", "head"});
  CHECK(all.missing.empty());
  CHECK(all.reason.empty());
  const ProfileCoverage b2 = cost.coverage(m, workload(2));
  CHECK(b2.profiled.empty());
  CHECK(b2.missing == std::vector<std::string>{"embedding", "block", "head"});
  CHECK(b2.reason == "the profile has no entry at micro-batch 2 x 8 tokens");
  const ProfileCoverage sel = cost.coverage(m, workload(1, Recompute::Selective));
  CHECK(sel.profiled == std::vector<std::string>{"embedding", "head"});
  CHECK(sel.missing == std::vector<std::string>{"block"});
  CHECK(sel.reason == "the profile has no selective-recompute time");
  Profile with_rebuild;
  add_entries(with_rebuild, m, 1, true);
  const ProfiledCostModel rebuilt(with_rebuild, m, analytic);
  Workload modules = workload(1, Recompute::Selective);
  CHECK(rebuilt.coverage(m, modules).missing.empty());
  modules.recompute_modules = recompute_modules_from_string("layernorm,mlp");
  CHECK(rebuilt.coverage(m, modules).missing == std::vector<std::string>{"block"});
  CHECK(rebuilt.coverage(m, modules).reason == "the profile's selective recompute reruns core_attn, not layernorm,mlp");
  CHECK(cost.coverage(m, workload(1, Recompute::None, 2)).reason == "tp 2: the profile is of one device");
}

TEST_CASE("a plan search's scenarios at several micro-batch sizes share one profiled model") {
  // gpipe over 2 ranks, 2 blocks per stage, on the ideal cluster: with every layer profiled the step is
  // (m + p - 1) x the stage's F + B + W; b = 1 puts 1 + 2 + 3 ms on each of 2 blocks, embedding and head
  // free. b = 2 is not in the profile: the step is the analytic one.
  const Model model = test::tiny_llama(4);
  Profile p;
  add_entries(p, model, 1, false);
  for (LayerProfile& l : p.layers)
    if (l.kind != "block") l.forward = l.backward_input = l.backward_weight = fixed(0);
  const AnalyticCostModel analytic;
  const ProfiledCostModel cost(p, model, analytic);
  Scenario s;
  s.model = model;
  s.cluster = cluster_preset("ideal");
  s.parallel.pp = 2;
  s.parallel.microbatches = 2;
  s.schedule = "gpipe";
  s.split = {2, 2};
  CHECK(evaluate(s, cost).stages[0].cost.forward_s == Approx(2e-3));
  s.workload.micro_batch_size = 2;
  CHECK(evaluate(s, cost).sim.step_time_s == evaluate(s, analytic).sim.step_time_s);
}

TEST_CASE("the softmax rebuild survives the profile's JSON round trip and may be absent") {
  const Model m = test::tiny_llama(2);
  Profile p;
  add_entries(p, m, 1, true);
  add_entries(p, m, 2, false);
  const Profile q = profile_from_json_text(profile_to_json_text(p), "p.json");
  REQUIRE(q.layers.size() == 6);
  REQUIRE(q.layers[1].selective_recompute.has_value());
  CHECK(q.layers[1].selective_recompute->median_s == 1e-4);
  CHECK_FALSE(q.layers[0].selective_recompute.has_value());
  CHECK_FALSE(q.layers[4].selective_recompute.has_value());
  CHECK(profile_to_json_text(q) == profile_to_json_text(p));
}

TEST_CASE("the quick profile run measures one micro-batch shape and the link up to 1 MiB") {
  const CpuProfileRequest r = quick_profile_request(2, 8);
  CHECK(r.micro_batch_sizes == std::vector<int>{2});
  CHECK(r.link_sizes == std::vector<double>{1024, 4096, 16384, 65536, 262144, 1048576});
  const Profile p = profile_cpu(test::tiny_llama(2), r);
  CHECK(p.tool.find("profiler (cpu)") != std::string::npos);
  CHECK(p.machine.backend == "cpu");
  REQUIRE(p.layers.size() == 3);
  for (const LayerProfile& l : p.layers) {
    CHECK(l.micro_batch_size == 2);
    CHECK(l.seq_len == 8);
    // Passes over both of the model's blocks: two samples of the block a pass.
    const int copies = l.kind == "block" ? 2 : 1;
    CHECK(l.forward.repetitions >= 5 * copies);
    CHECK(l.forward.repetitions <= 200 * copies);
  }
  REQUIRE(p.links.size() == 1);
  CHECK(p.links[0].samples.size() == 6);
  CHECK(p.optimizer_s_per_parameter > 0);
}

TEST_CASE("a profiled MoE block carries no host floor: its measured times include the host's") {
  const Model m = test::tiny_moe(2);
  const Layer& moe_block = m.layers[2];
  REQUIRE(profile_kind(*m.transformer, moe_block) == "moe-block");
  Profile p;
  LayerProfile l;
  l.kind = "moe-block";
  l.shape = layer_shape(*m.transformer, moe_block);
  l.micro_batch_size = 1;
  l.seq_len = 8;
  l.forward = l.backward_input = l.backward_weight = fixed(1e-3);
  p.layers.push_back(l);
  AnalyticCostParams params;
  params.moe_host_s = 9e-3;
  const AnalyticCostModel analytic(params);
  const ProfiledCostModel cost(p, m, analytic);
  Workload w;
  w.seq_len = 8;
  CHECK(cost.host_time(moe_block, layer_work(m, moe_block, w), Phase::Forward, 1) == 0);
  // Micro-batch 2 is not in the profile: the analytic model times it, host floor included.
  w.micro_batch_size = 2;
  const LayerWork unprofiled = layer_work(m, moe_block, w);
  CHECK(cost.host_time(moe_block, unprofiled, Phase::Forward, 1) ==
        analytic.host_time(moe_block, unprofiled, Phase::Forward, 1));
  CHECK(cost.host_time(moe_block, unprofiled, Phase::Forward, 1) > 0);
}

TEST_CASE("a profile's one-pass backward survives its JSON round trip and prices BW") {
  // The block's B 2 ms and W 3 ms apart, 4 ms as one pass: BW saves 1 ms a block; full recomputation adds its
  // F to B either way, so it saves the same; an entry without one, and the layers the profile lacks, save
  // nothing.
  const Model m = test::tiny_llama(2);
  Profile p;
  add_entries(p, m, 1, false);
  p.layers[1].backward = fixed(4e-3);
  const Profile q = profile_from_json_text(profile_to_json_text(p), "p.json");
  REQUIRE(q.layers[1].backward.has_value());
  CHECK(q.layers[1].backward->median_s == 4e-3);
  CHECK_FALSE(q.layers[0].backward.has_value());
  CHECK(profile_to_json_text(q) == profile_to_json_text(p));
  const AnalyticCostModel analytic;
  const ProfiledCostModel cost(q, m, analytic);
  const Layer& block = m.layers[1];
  CHECK(block.kind == LayerKind::Block);
  for (Recompute r : {Recompute::None, Recompute::Full}) {
    const LayerWork work = layer_work(m, block, workload(1, r));
    CHECK(cost.full_backward_saving(block, work, 1) == Approx(1e-3));
    CHECK(cost.full_backward_saving(m.layers[0], layer_work(m, m.layers[0], workload(1, r)), 1) == 0);
  }
  CHECK(cost.full_backward_saving(block, layer_work(m, block, workload(2)), 1) == 0);  // no entry at b = 2
}
