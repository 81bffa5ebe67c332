// The work of MoE blocks (core/moe_work.cpp) in closed form: FLOPs of the router, the top-k experts and the
// shared ones; the all-to-all bytes per token; expert memory per GPU under ep; the all-to-all's time on the
// links the folded ep group uses; and what expert parallelism refuses.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/expert_parallel.hpp"
#include "core/layer_work.hpp"
#include "core/model.hpp"
#include "core/overlapped_pair.hpp"
#include "core/stage_costs.hpp"
#include "../error_text.hpp"

using namespace pw;

namespace {

Workload moe_workload(int tp, int ep, int s = 4096) {
  Workload w;
  w.seq_len = s;
  w.tp = tp;
  w.ep = ep;
  w.sequence_parallel = tp > 1;
  return w;
}

// dp GPUs of one stage, ep of them per expert group, placed tp-dp-pp (data-parallel peers consecutive).
ParallelConfig folded(int dp, int ep) {
  ParallelConfig pc;
  pc.dp = dp;
  pc.ep = ep;
  pc.order = RankOrder::TpDpPp;
  return pc;
}

}  // namespace

TEST_CASE("an MoE block's forward: attention, router, top-k experts, two all-to-alls of tokens x k x h") {
  const Model m = model_preset("mixtral-8x7b");
  const Layer& block = m.layers[static_cast<size_t>(m.block_index(0))];
  const double n = 4096, h = 4096, q = 4096, kv = 1024, E = 8, k = 2, f = 14336;
  const LayerWork lw = layer_work(m, block, moe_workload(1, 1));
  // QKV and output projections, the router (h x E), and per routed copy the gated expert (h x 2f, f x h).
  CHECK(lw.forward.gemm_flops == 2 * n * (h * (q + 2 * kv) + q * h + h * E + k * 3 * h * f));
  CHECK(lw.forward.routed_gemm_flops == 2 * n * k * 3 * h * f);
  // W: the same GEMMs' weight gradients; B: their input gradients.
  CHECK(lw.backward_weight.gemm_flops == lw.forward.gemm_flops);
  CHECK(lw.backward_input.gemm_flops == lw.forward.gemm_flops);
  // Dispatch and combine in F, their gradients in B: each sends every token's k copies of h bf16 values.
  CHECK(lw.forward.all_to_alls == std::vector<double>{2 * n * k * h, 2 * n * k * h});
  CHECK(lw.backward_input.all_to_alls == std::vector<double>{2 * n * k * h, 2 * n * k * h});
  CHECK(lw.backward_weight.all_to_alls.empty());
  CHECK(lw.forward.collectives.empty());  // no tp

  // With tp 2 and sequence parallelism each rank routes its half of the tokens: half the bytes.
  const LayerWork tp2 = layer_work(m, block, moe_workload(2, 1));
  CHECK(tp2.forward.all_to_alls == std::vector<double>{n * k * h, n * k * h});
  CHECK(tp2.forward.routed_gemm_flops == n * k * 3 * h * f);
  // A capacity factor pads every expert to 1.25 times the average: its FLOPs and bytes, and no imbalance.
  Workload padded = moe_workload(1, 1);
  padded.capacity_factor = 1.25;
  const LayerWork cf = layer_work(m, block, padded);
  CHECK(cf.forward.all_to_alls.front() == 1.25 * 2 * n * k * h);
  CHECK(cf.forward.routed_gemm_flops == 1.25 * 2 * n * k * 3 * h * f);
  CHECK(cf.forward.routed_padded);
  // Model FLOPs count the routed tokens, not the padding, and no ep or tp.
  CHECK(model_flops_per_microbatch(m, padded) == model_flops_per_microbatch(m, moe_workload(1, 1)));
  CHECK(model_flops_per_microbatch(m, moe_workload(2, 4)) == model_flops_per_microbatch(m, moe_workload(1, 1)));
}

TEST_CASE("expert parameters and memory per GPU divide by ep x etp, the dense part by tp") {
  const Model m = model_preset("mixtral-8x7b");
  const Layer& block = m.layers[static_cast<size_t>(m.block_index(0))];
  const double h = 4096, f = 14336, E = 8;
  const double routed = E * 3 * h * f;
  const double dense = h * 4096 + 2 * h * 1024 + 4096 * h + 2 * h + E * h;
  const LayerWork ep8 = layer_work(m, block, moe_workload(1, 8));
  CHECK(ep8.routed_parameters == routed / 8);
  CHECK(ep8.parameters == dense + routed / 8);
  Workload etp = moe_workload(2, 4);
  etp.etp = 2;
  const LayerWork folded = layer_work(m, block, etp);
  CHECK(folded.routed_parameters == routed / 8);
  CHECK(folded.parameters == (h * 4096 + 2 * h * 1024 + 4096 * h) / 2 + 2 * h + E * h + routed / 8);
  // Stored for the backward per routed copy: fc1's input (h), its gate and up (2f) and their product weighted by
  // the router (f), no expert output (the weights scale the activation, Megatron-Core 0.13 on); the router's
  // fp32 scores and the routing map per token and expert.
  const double n = 4096, k = 2;
  const LayerWork none = layer_work(m, block, moe_workload(1, 1));
  Workload dense_like = moe_workload(1, 1);
  // Doubling top_k adds exactly the per-copy tensors.
  Model k4 = m;
  k4.transformer->moe->top_k = 4;
  const LayerWork more = layer_work(k4, k4.layers[1], dense_like);
  CHECK(more.activation_bytes - none.activation_bytes == 2 * n * (4 - k) * (h + 2 * f + f));
}

TEST_CASE("multi-head latent attention: its projections through the latents and its attention core") {
  const Model m = model_preset("deepseek-v3");
  const Layer& dense_block = m.layers[static_cast<size_t>(m.block_index(0))];
  const double n = 4096, h = 7168, H = 128;
  Workload w = moe_workload(1, 1);
  const LayerWork lw = layer_work(m, dense_block, w);
  // q down and up, kv down (latent and shared rope key) and up, output; the dense MLP (3 x h x 18432).
  const double projections = h * 1536 + 1536 * H * 192 + h * 576 + 512 * H * 256 + H * 128 * h;
  CHECK(lw.forward.gemm_flops == 2 * n * (projections + 3 * h * 18432));
  // QK^T over 192-wide query and key heads, AV over 128-wide values, the whole 4096-token square.
  CHECK(lw.forward.attention_flops == 2 * n * 4096 * (H * 192 + H * 128));
  CHECK(lw.parameters == projections + 1536 + 512 + 2 * h + 3 * h * 18432);
}

TEST_CASE("the all-to-all's time: ep peers inside the node over NVLink, the rest over the network") {
  const Cluster cluster = cluster_preset("dgx-h100");
  ParallelConfig pc = folded(16, 16);
  // Folded: 16 consecutive GPUs, two nodes of 8: 7 peers inside, 8 across.
  const AllToAllLinks l = all_to_all_links(cluster, pc, 0);
  CHECK(l.in_node == 7);
  CHECK(l.across == 8);
  CHECK(ep_group(pc, 0) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  // With pp between tp and dp (tp-pp-dp), dp peers are pp apart: a group of 16 spans 4 nodes.
  pc.pp = 2;
  pc.order = RankOrder::TpPpDp;
  const AllToAllLinks spread = all_to_all_links(cluster, pc, 0);
  CHECK(spread.in_node == 3);
  CHECK(spread.across == 12);
  CHECK(ep_group(pc, 1).front() == 1);
  CHECK(expert_dp_group(pc, 0) == std::vector<int>{0});

  const AnalyticCostModel cost;
  const double bytes = 64e6;
  const double in_node = 2.5e-6 + 3 * bytes / 16 / (450e9 * 0.75);
  const double across = 6e-6 + 12 * bytes / 16 / (50e9 * 0.75);
  CHECK(cost.all_to_all_time(bytes, spread) == Approx(std::max(in_node, across)).epsilon(1e-12));

  // The busiest rank's imbalance stretches its routed GEMMs and all-to-alls.
  const Model m = model_preset("mixtral-8x7b");
  const LayerWork lw = layer_work(m, m.layers[1], moe_workload(1, 16));
  AnalyticCostParams skewed;
  skewed.moe_load_imbalance = 1.5;
  const AnalyticCostModel busy(skewed);
  const GpuSpec& gpu = cluster.gpu;
  CHECK(busy.compute_time(lw.forward, gpu) - cost.compute_time(lw.forward, gpu) ==
        Approx(0.5 * lw.forward.routed_gemm_flops / (gpu.peak_flops * 0.70)).epsilon(1e-9));
  CHECK(busy.expert_comm_time(lw, Phase::Forward, spread) ==
        Approx(2 * cost.all_to_all_time(1.5 * lw.forward.all_to_alls.front(), spread)).epsilon(1e-12));
}

TEST_CASE("routed experts' model state is sharded over the expert-data-parallel group") {
  const Model m = model_preset("mixtral-8x7b");
  const Cluster cluster = cluster_preset("dgx-h100");
  const AnalyticCostModel cost;
  const ParallelConfig pc = folded(8, 8);
  Workload w = moe_workload(1, 8);
  const std::vector<LayerRange> one = {LayerRange{1, 1}};
  const StageCost sc = stage_costs(m, one, w, pc, cluster, cost, {0}).front();
  const LayerWork lw = layer_work(m, m.layers[1], w);
  // ZeRO-1: the dense part's optimizer state over dp 8; each expert lives on one GPU (expert dp 1): whole.
  CHECK(sc.routed_parameters == lw.routed_parameters);
  CHECK(sc.model_state_bytes - sc.reserved_bytes ==
        Approx((lw.parameters - lw.routed_parameters) * (2 + 4 + 12.0 / 8) + lw.routed_parameters * (2 + 4 + 12)));
  CHECK(sc.expert_comm_forward_s > 0);
  CHECK(sc.expert_comm_forward_s == cost.expert_comm_time(lw, Phase::Forward, all_to_all_links(cluster, pc, 0)));
  CHECK(sc.overlapped_fb_s == 0);  // no measured pair time: composites are charged by overlapped_pair_time
}

TEST_CASE("an F&B composite hides each half's all-to-alls behind the other half's compute") {
  // Compute 4 and 6 s, all-to-alls 1 and 3 s: each hides entirely.
  CHECK(overlapped_pair_time(5, 1, 9, 3, 0) == 10);
  // All-to-alls 5 and 7 s against compute 1 and 2 s: 5 - 2 and 7 - 1 stay uncovered.
  CHECK(overlapped_pair_time(6, 5, 9, 7, 0) == 1 + 2 + 3 + 6);
  // The all-to-alls' kernels hold a quarter of the SMs: the 1 + 3 s they overlap cost the compute 1 s more.
  CHECK(overlapped_pair_time(5, 1, 9, 3, 0.25) == 11);
  // Covered 2 and 1 s of the all-to-alls: 0.75 s more.
  CHECK(overlapped_pair_time(6, 5, 9, 7, 0.25) == 12.75);
  // Never below the longer half nor both halves' compute, never above the halves' sum.
  for (double share : {0.0, 20.0 / 132, 0.5})
    for (double fc : {0.5, 2.0})
      for (double fa : {0.0, 1.0, 4.0})
        for (double bc : {1.0, 3.0})
          for (double ba : {0.0, 2.0, 8.0}) {
            const double t = overlapped_pair_time(fc + fa, fa, bc + ba, ba, share);
            CHECK(t >= std::max(fc + fa, bc + ba) - 1e-12);
            CHECK(t >= fc + bc - 1e-12);
            CHECK(t <= fc + fa + bc + ba + 1e-12);
          }
}

TEST_CASE("expert parallelism refuses what cannot run, naming the option and the fix") {
  const Model mixtral = model_preset("mixtral-8x7b");
  Workload w;
  ParallelConfig pc;
  pc.dp = 8;
  pc.ep = 3;
  CHECK(bad_input([&] { check_expert_parallel(mixtral, pc, w); }) ==
        "--ep: 3 does not divide the 8 routed experts of 'mixtral-8x7b'; use a divisor of 8");
  pc.ep = 8;
  pc.dp = 4;
  CHECK(bad_input([&] { check_expert_parallel(mixtral, pc, w); }) ==
        "--ep: ep x etp = 8 x 1 does not divide the tp x cp x dp = 4 GPUs of a stage that the experts fold into; use "
        "an ep x etp that divides 4");
  pc.ep = 2;
  pc.etp = 3;
  CHECK(bad_input([&] { check_expert_parallel(mixtral, pc, w); }) ==
        "--etp: 3 does not divide the experts' intermediate size 14336 of 'mixtral-8x7b'; use a divisor of 14336");
  pc.etp = 1;
  pc.tp = 2;
  w.sequence_parallel = false;
  CHECK(bad_input([&] { check_expert_parallel(mixtral, pc, w); }) ==
        "--no-sequence-parallel: Megatron-Core's MoE layers need sequence parallelism with --tp 2; drop "
        "--no-sequence-parallel or use --tp 1");
  const Model dense = model_preset("llama3-8b");
  CHECK(bad_input([&] { check_expert_parallel(dense, pc, w); }) ==
        "--ep: model 'llama3-8b' has no routed experts to spread; use --ep 1 --etp 1 or a mixture-of-experts model");
  w.capacity_factor = -1;
  CHECK(bad_input([&] { check_expert_parallel(mixtral, pc, w); }) ==
        "--capacity-factor: must be 0 (dropless) or a factor up to 1e+06 such as 1.25, got -1");
}

TEST_CASE("the flex dispatcher sends one copy of a token to each other node holding any of its experts") {
  const Cluster cluster = cluster_preset("dgx-h100");
  const ParallelConfig pc = folded(16, 16);
  const AllToAllLinks two_nodes = all_to_all_links(cluster, pc, 0);  // 8 + 8
  const AnalyticCostModel cost;
  const double bytes = 2.0 * 4096 * 8 * 2048;  // 4096 tokens x top 8 x h 2048, bf16
  const RoutedDispatch flex{128, 8, true};
  // 64 of the 128 experts on the other node: it is missed with C(64, 8) / C(128, 8).
  double missed = 1;
  for (int i = 0; i < 8; ++i) missed *= (64.0 - i) / (128.0 - i);
  const double across = 6e-6 + bytes / 8 * (1 - missed) / (50e9 * 0.75);
  const double in_node = 2.5e-6 + bytes * 7 / 8 / (450e9 * 0.75);
  CHECK(cost.all_to_all_time(bytes, two_nodes, flex) == Approx(std::max(across, in_node)).epsilon(1e-12));
  // The alltoall dispatcher sends the 8 / 16 of each token's copies that live on the other node.
  CHECK(cost.all_to_all_time(bytes, two_nodes) == Approx(6e-6 + 8 * bytes / 16 / (50e9 * 0.75)).epsilon(1e-12));
  // Inside one node nothing is deduplicated.
  ParallelConfig one = pc;
  one.ep = 8;
  const AllToAllLinks node = all_to_all_links(cluster, one, 0);
  CHECK(cost.all_to_all_time(bytes, node, flex) == cost.all_to_all_time(bytes, node));
  CHECK(bad_input([] { dispatcher_from_string("deepep"); }) ==
        "--dispatcher: 'deepep' is not a token dispatcher; use alltoall or flex (DeepEP, HybridEP)");
}

TEST_CASE("group-limited routing caps the nodes a token reaches when whole groups sit on each node") {
  // DeepSeek-V3's routing on 8 H800 nodes at ep 64: 256 experts in 8 groups, top 8 inside the best 4 groups,
  // one group per node. A node is missed when its group is not among the 4: C(7, 4) / C(8, 4) = 1/2, so a
  // token reaches 7 x 1/2 = 3.5 other nodes, where uniform routing reaches 7 x (1 - C(224, 8) / C(256, 8)).
  const Cluster cluster = cluster_preset("dgx-h800");
  const ParallelConfig pc = folded(64, 64);
  const AllToAllLinks eight_nodes = all_to_all_links(cluster, pc, 0);
  REQUIRE(eight_nodes.across == 56);
  const AnalyticCostModel cost;
  const double bytes = 2.0 * 4096 * 8 * 7168;  // 4096 tokens x top 8 x h 7168, bf16
  const double token_bytes = bytes / 8;
  const double in_node = 2.5e-6 + bytes * 7 / 8 / (200e9 * 0.75);
  const RoutedDispatch grouped{256, 8, true, 8, 4};
  const double across = 6e-6 + token_bytes * 7 * 0.5 / (50e9 * 0.75);
  CHECK(cost.all_to_all_time(bytes, eight_nodes, grouped) == Approx(std::max(across, in_node)).epsilon(1e-12));
  double missed = 1;
  for (int i = 0; i < 8; ++i) missed *= (224.0 - i) / (256.0 - i);
  const RoutedDispatch uniform{256, 8, true};
  CHECK(cost.all_to_all_time(bytes, eight_nodes, uniform) ==
        Approx(6e-6 + token_bytes * 7 * (1 - missed) / (50e9 * 0.75)).epsilon(1e-12));
  // The limit only caps: top 2 inside the best 4 groups reaches at most 2 groups (missed 21/28), fewer than
  // uniform routing's 2 experts do (missed (224 x 223) / (256 x 255), more), so uniform routing stands.
  CHECK(cost.all_to_all_time(bytes / 4, eight_nodes, RoutedDispatch{256, 2, true, 8, 4}) ==
        cost.all_to_all_time(bytes / 4, eight_nodes, RoutedDispatch{256, 2, true}));
  // Groups straddling nodes (8 groups over 16 nodes at ep 128) cap nothing: uniform routing.
  const AllToAllLinks sixteen = all_to_all_links(cluster, folded(128, 128), 0);
  CHECK(cost.all_to_all_time(bytes, sixteen, grouped) == cost.all_to_all_time(bytes, sixteen, uniform));
  // The alltoall dispatcher sends each copy to its expert's GPU, limited or not.
  CHECK(cost.all_to_all_time(bytes, eight_nodes, RoutedDispatch{256, 8, false, 8, 4}) == cost.all_to_all_time(bytes, eight_nodes));

  // The model reads it from DeepSeek's config (n_group, topk_group) and checks it.
  const Model v3 = load_model(std::string(PIPEWRIGHT_SOURCE_DIR) + "/examples/deepseek-v3.config.json");
  CHECK(v3.transformer->moe->groups == 8);
  CHECK(v3.transformer->moe->top_groups == 4);
  CHECK(model_preset("deepseek-v3").transformer->moe->groups == 8);
  MoeConfig m = *v3.transformer->moe;
  m.groups = 7;
  CHECK(bad_input([&] { check_moe(m, 61, "v3"); }) == "v3: 7 expert groups do not divide the 256 experts; give a divisor of 256");
  m.groups = 8;
  m.top_groups = 9;
  CHECK(bad_input([&] { check_moe(m, 61, "v3"); }) ==
        "v3: the top 9 groups are not between 1 and the 8 groups; give a number from 1 to 8");
  m.groups = 64;
  m.top_groups = 1;
  CHECK(bad_input([&] { check_moe(m, 61, "v3"); }) ==
        "v3: top_k 8 is more than the 4 experts of the top 1 groups; give more top groups");
}
