#include <catch2/catch.hpp>

#include <optional>

#include <functional>
#include <limits>

#include "core/analytic_cost_model.hpp"
#include "core/error.hpp"
#include "core/model.hpp"
#include "core/stage_costs.hpp"

using namespace pw;

namespace {

// Embedding, `blocks` transformer blocks, head: a hand-made layer list (no transformer shape needed).
Model toy_model(int blocks) {
  Model m;
  m.name = "toy";
  m.layers.push_back(Layer{"embedding", LayerKind::Embedding, std::nullopt});
  for (int i = 0; i < blocks; ++i) m.layers.push_back(Layer{"block", LayerKind::Block, std::nullopt});
  m.layers.push_back(Layer{"head", LayerKind::Head, std::nullopt});
  return m;
}

std::string bad_input_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    return e.what();
  }
  return "";
}

bool same(const std::vector<LayerRange>& got, const std::vector<std::pair<int, int>>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].first != want[i].first || got[i].last != want[i].second) return false;
  return true;
}

// 4 GPUs per node; NVLink 1e11 B/s, 1 us inside; network 1e10 B/s, 10 us between nodes.
Cluster toy_cluster() {
  Cluster c;
  c.name = "toy";
  c.gpus_per_node = 4;
  c.gpu = GpuSpec{"toy-gpu", 100e12, 80e9, 1e12};
  c.intra_node = LinkSpec{1e11, 1e-6};
  c.inter_node = LinkSpec{1e10, 1e-5};
  return c;
}

AnalyticCostParams round_params() {
  AnalyticCostParams p;
  p.gemm_efficiency = 0.5;
  p.attention_efficiency = 0.5;
  p.memory_efficiency = 0.5;
  p.kernel_overhead_s = 0;
  p.collective_efficiency = 0.5;
  p.optimizer_bytes_per_parameter = 30;
  p.memory_reserve_bytes = 1e9;
  return p;
}

// Hand-made work for toy_model(4) at 100 TFLOP/s x 0.5 and 1 TB/s x 0.5:
//  embedding: F and W 1e9 memory bytes (2 ms each), 1e8 parameters, 1e8 activation bytes;
//  block: F 1e12 GEMM FLOPs (20 ms) + an all-reduce of 1e8 bytes over tp = 2 on NVLink
//         (2 (1/2) 1e8 / 5e10 + 2 x 1 x 1e-6 = 2.002 ms), B 1e12 (20 ms) + recompute 0.5e12 (10 ms),
//         W 1e12 (20 ms); 2e8 parameters, 4e8 activation bytes of which 1e8 kept for W, 1e7 output bytes;
//  head: F, B, W 2e12 FLOPs each (40 ms); 1e8 parameters, 2e8 activation bytes.
std::vector<LayerWork> toy_work() {
  std::vector<LayerWork> work(6);
  work[0].forward.memory_bytes = 1e9;
  work[0].backward_weight.memory_bytes = 1e9;
  work[0].parameters = 1e8;
  work[0].activation_bytes = 1e8;
  work[0].output_bytes = 1e7;
  for (int i = 1; i <= 4; ++i) {
    LayerWork& b = work[i];
    b.forward.gemm_flops = 1e12;
    b.forward.collectives = {Collective{CollectiveKind::AllReduce, 1e8}};
    b.backward_input.gemm_flops = 1e12;
    b.recompute.gemm_flops = 0.5e12;
    b.backward_weight.gemm_flops = 1e12;
    b.parameters = 2e8;
    b.activation_bytes = 4e8;
    b.weight_grad_bytes = 1e8;
    b.output_bytes = 1e7;
  }
  work[5].forward.gemm_flops = 2e12;
  work[5].backward_input.gemm_flops = 2e12;
  work[5].backward_weight.gemm_flops = 2e12;
  work[5].parameters = 1e8;
  work[5].activation_bytes = 2e8;
  return work;
}

// tp 2 x pp 2 x dp 2 over the toy model split 2 + 2 blocks, stage 0 on GPUs 0-1 and stage 1 on GPUs 2-3
// (node 0); their dp peers are 4 ranks on, on node 1.
ParallelConfig toy_parallel(bool distributed_optimizer, bool overlap_grad_reduce) {
  ParallelConfig pc;
  pc.tp = 2;
  pc.pp = 2;
  pc.dp = 2;
  pc.zero = distributed_optimizer ? 1 : 0;
  pc.overlap_grad_reduce = overlap_grad_reduce;
  pc.overlap_param_gather = false;  // the gather whole, after the reduction (tested on its own below)
  return pc;
}

std::vector<StageCost> toy_stage_costs(const ParallelConfig& pc) {
  const Model m = toy_model(4);
  return stage_costs(m, toy_work(), split_layers(m, 2, {2, 2}), pc, toy_cluster(), AnalyticCostModel(round_params()), {0, 2});
}

}  // namespace

TEST_CASE("an explicit split maps blocks to stages, embedding joins the first and head the last") {
  const Model m = toy_model(4);  // layers: 0 embedding, 1-4 blocks, 5 head
  CHECK(same(split_layers(m, 2, {2, 2}), {{0, 2}, {3, 5}}));
  CHECK(same(split_layers(m, 3, {1, 2, 1}), {{0, 1}, {2, 3}, {4, 5}}));
  // A zero is allowed where the stage still holds the embedding or the head.
  CHECK(same(split_layers(m, 2, {0, 4}), {{0, 0}, {1, 5}}));
  CHECK(same(split_layers(m, 2, {4, 0}), {{0, 4}, {5, 5}}));
  CHECK(same(split_layers(m, 3, {0, 4, 0}), {{0, 0}, {1, 4}, {5, 5}}));
}

TEST_CASE("explicit splits that do not fit the model are rejected with the fix") {
  const Model m = toy_model(4);
  CHECK(bad_input_of([&] { split_layers(m, 2, {1, 2}); }) ==
        "--split: 1 + 2 = 3 layers but the model has 4 transformer layers; give numbers that sum to 4");
  CHECK(bad_input_of([&] { split_layers(m, 2, {1, 2, 1}); }) ==
        "--split: 3 numbers for 2 stages; give one number per stage (per chunk with --vpp)");
  CHECK(bad_input_of([&] { split_layers(m, 3, {2, 0, 2}); }) ==
        "--split: stage 1 has 0 layers and holds neither the embedding nor the head; give it at least 1");
  CHECK(bad_input_of([&] { split_layers(m, 2, {5, -1}); }) ==
        "--split: -1 is negative; give each stage a number of layers >= 0");
  CHECK(bad_input_of([&] { split_layers(m, 7, {}); }) ==
        "--pp x --vpp = 7 stages but the model has only 6 layers; use fewer stages");
  CHECK(bad_input_of([&] { split_layers(m, 0, {}); }) == "--pp x --vpp = 0 stages; give at least 1 stage");
}

TEST_CASE("a stage of an explicit model cannot be empty") {
  Model m;
  m.name = "measured";
  for (int i = 0; i < 3; ++i)
    m.layers.push_back(Layer{"l", LayerKind::Explicit, ExplicitCosts{1, 1, 1, 0, 0, 0, std::nullopt}});
  CHECK(same(split_layers(m, 2, {1, 2}), {{0, 0}, {1, 2}}));
  // No embedding to keep the first stage busy.
  CHECK(bad_input_of([&] { split_layers(m, 2, {0, 3}); }) ==
        "--split: stage 0 has 0 layers and holds neither the embedding nor the head; give it at least 1");
}

TEST_CASE("the balanced split minimises the most expensive stage") {
  const Model m = toy_model(6);  // 8 layers
  // Costs E 1, blocks 2 each, H 3 (total 16) into 3 stages. The head's stage is [b, H] = 5 ([H] alone
  // leaves 13 for two stages, >= 7; [b, b, H] = 7); the rest, E + 5 b = 11, splits best as
  // [E, b, b] = 5 and [b, b, b] = 6. Maximum 6, and no other split reaches it.
  const std::vector<double> cost = {1, 2, 2, 2, 2, 2, 2, 3};
  CHECK(same(split_layers(m, 3, {}, cost), {{0, 2}, {3, 5}, {6, 7}}));
  // One stage per layer is the only split with 8 stages.
  CHECK(same(split_layers(m, 8, {}, cost), {{0, 0}, {1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}, {6, 6}, {7, 7}}));
}

TEST_CASE("among splits with the same bottleneck, the balanced split evens out the others") {
  Model m;
  for (int i = 0; i < 5; ++i) m.layers.push_back(Layer{"l", LayerKind::Explicit, ExplicitCosts{}});
  // [1,1,1,1,10] into 3: the last layer alone sets the maximum 10 whatever the rest does; the first
  // four split as [1,1][1,1] (squares 4 + 4) rather than [1][1,1,1] (1 + 9) or [1,1,1][1].
  CHECK(same(split_layers(m, 3, {}, {1, 1, 1, 1, 10}), {{0, 1}, {2, 3}, {4, 4}}));
  // [1,1,1,10] into 3: [1][1,1] and [1,1][1] tie (1 + 4); the later stage takes more layers.
  Model four;
  for (int i = 0; i < 4; ++i) four.layers.push_back(Layer{"l", LayerKind::Explicit, ExplicitCosts{}});
  CHECK(same(split_layers(four, 3, {}, {1, 1, 1, 10}), {{0, 0}, {1, 2}, {3, 3}}));
}

TEST_CASE("without layer costs, blocks count 1 and the embedding and head nothing") {
  const Model m = toy_model(4);
  CHECK(same(split_layers(m, 2, {}), {{0, 2}, {3, 5}}));
  CHECK(same(split_layers(m, 4, {}), {{0, 1}, {2, 2}, {3, 3}, {4, 5}}));
}

TEST_CASE("stage costs sum their layers and add gradient reduction and the optimizer step") {
  // One bucket: the whole reduction after the last backward.
  const std::vector<StageCost> sc = toy_stage_costs(toy_parallel(true, false));
  REQUIRE(sc.size() == 2);

  // Stage 0 = embedding + 2 blocks.
  CHECK(sc[0].forward_s == Approx(0.002 + 2 * (0.02 + 0.002002)).epsilon(1e-12));  // 0.046004
  CHECK(sc[0].backward_input_s == Approx(2 * (0.02 + 0.01)).epsilon(1e-12));      // 0.06
  CHECK(sc[0].backward_weight_s == Approx(0.002 + 2 * 0.02).epsilon(1e-12));      // 0.042
  CHECK(sc[0].activation_bytes == 9e8);   // 1e8 + 2 x 4e8
  CHECK(sc[0].weight_grad_bytes == 2e8);  // 2 x 1e8
  CHECK(sc[0].output_bytes == 1e7);       // the last block's output
  CHECK(sc[0].parameters == 5e8);         // 1e8 + 2 x 2e8
  // 5e8 x (2 + 4 + 12/2) = 6e9 bytes, plus the 1e9 reserve of the GPU.
  CHECK(sc[0].model_state_bytes == Approx(7e9).epsilon(1e-15));
  CHECK(sc[0].reserved_bytes == 1e9);
  // Distributed optimizer over dp = 2 on the 1e10 x 0.5 B/s network: reduce-scatter of 5e8 x 4 bytes
  // (1/2) 2e9 / 5e9 + 1e-5 = 0.20001 s, all-gather of 5e8 x 2 bytes 0.1 + 1e-5 = 0.10001 s.
  CHECK(sc[0].grad_reduce_s == Approx(0.30002).epsilon(1e-12));
  // Adam over 5e8 / 2 parameters: 2.5e8 x 30 / (1e12 x 0.5) = 0.015 s.
  CHECK(sc[0].optimizer_s == Approx(0.015).epsilon(1e-12));

  // Stage 1 = 2 blocks + head.
  CHECK(sc[1].layers.first == 3);
  CHECK(sc[1].layers.last == 5);
  CHECK(sc[1].forward_s == Approx(2 * 0.022002 + 0.04).epsilon(1e-12));  // 0.084004
  CHECK(sc[1].backward_input_s == Approx(0.06 + 0.04).epsilon(1e-12));
  CHECK(sc[1].backward_weight_s == Approx(0.04 + 0.04).epsilon(1e-12));
  CHECK(sc[1].activation_bytes == 1e9);  // 2 x 4e8 + 2e8
  CHECK(sc[1].output_bytes == 0);        // the head sends nothing on
  CHECK(sc[1].parameters == 5e8);
  CHECK(sc[1].reserved_bytes == 1e9);
}

TEST_CASE("two copies of the model (bidirectional DualPipe): a part's copies shard its ZeRO state and reduce together") {
  // The toy's two parts, each on both ranks: stage 2 is part 0 again on rank 1 (GPU 2), stage 3 part 1 on rank 0.
  const Model m = toy_model(4);
  const std::vector<LayerRange> parts = split_layers(m, 2, {2, 2});
  const std::vector<StageCost> sc =
      stage_costs(m, toy_work(), {parts[0], parts[1], parts[0], parts[1]}, toy_parallel(true, false), toy_cluster(),
                  AnalyticCostModel(round_params()), {0, 2, 2, 0}, 2);
  REQUIRE(sc.size() == 4);
  // Weights and gradients whole on each copy, the 12 bytes of Adam state over 2 x dp = 4: 5e8 x (2 + 4 + 3); the
  // reserve once per GPU, on its first stage.
  CHECK(sc[0].model_state_bytes == Approx(5.5e9).epsilon(1e-15));
  CHECK(sc[2].model_state_bytes == Approx(4.5e9).epsilon(1e-15));
  CHECK(sc[2].layers.first == sc[0].layers.first);
  CHECK(sc[2].layers.last == sc[0].layers.last);
  // Reduce-scatter over 4 members on the dp ring's network link: (3/4) 2e9 / 5e9 + 3e-5 = 0.30003 s; the
  // all-gather of the bf16 weights (3/4) 1e9 / 5e9 + 3e-5 = 0.15003 s.
  CHECK(sc[0].grad_reduce_s == Approx(0.45006).epsilon(1e-12));
  // Adam over 5e8 / 4 parameters: 1.25e8 x 30 / 5e11 = 0.0075 s.
  CHECK(sc[0].optimizer_s == Approx(0.0075).epsilon(1e-12));
  CHECK(sc[0].forward_s == toy_stage_costs(toy_parallel(true, false))[0].forward_s);
}

TEST_CASE("DeepSeek-V3's MTP module shares the embedding of its rank, and keeps its own copy elsewhere") {
  // Layers: 0 the embedding, 1-61 the blocks, 62 the MTP module, 63 the head. Two stages, the second holding the
  // MTP module: on another rank it keeps its own 129,280 x 7,168 table; on the embedding's rank (DualPipe puts
  // the first and last layers together) it uses that one.
  const Model m = model_preset("deepseek-v3");
  REQUIRE(m.layers[62].kind == LayerKind::Mtp);
  Workload w;
  w.seq_len = 4096;
  ParallelConfig pc;
  pc.pp = 2;
  const std::vector<LayerRange> ranges{{0, 31}, {32, 63}};
  const AnalyticCostModel cost;
  const std::vector<StageCost> apart = stage_costs(m, ranges, w, pc, toy_cluster(), cost, {0, 1});
  const std::vector<StageCost> together = stage_costs(m, ranges, w, pc, toy_cluster(), cost, {0, 0});
  CHECK(apart[1].parameters - together[1].parameters == 129280.0 * 7168);
  CHECK(apart[0].parameters == together[0].parameters);
}

TEST_CASE("without the distributed optimizer gradients are all-reduced and Adam runs on every parameter") {
  const std::vector<StageCost> sc = toy_stage_costs(toy_parallel(false, false));
  // All-reduce of 2e9 bytes over 2 ranks at 5e9 B/s: 2 (1/2) 2e9 / 5e9 + 2 x 1e-5 = 0.40002 s.
  CHECK(sc[0].grad_reduce_s == Approx(0.40002).epsilon(1e-12));
  // 5e8 x 30 / 5e11 = 0.03 s; state 5e8 x 18 + 1e9.
  CHECK(sc[0].optimizer_s == Approx(0.03).epsilon(1e-12));
  CHECK(sc[0].model_state_bytes == Approx(1e10).epsilon(1e-15));
}

TEST_CASE("bf16 gradients (--grad-reduce-in-bf16): 2 bytes a parameter kept and reduced") {
  ParallelConfig pc = toy_parallel(true, false);
  pc.grad_reduce_in_bf16 = true;
  const std::vector<StageCost> sc = toy_stage_costs(pc);
  // 5e8 x (2 + 2 + 12/2) = 5e9 bytes, plus the 1e9 reserve.
  CHECK(sc[0].model_state_bytes == Approx(6e9).epsilon(1e-15));
  CHECK(sc[0].grad_reduce_bytes == 5e8 * 2);
  // Reduce-scatter of 5e8 x 2 bytes: (1/2) 1e9 / 5e9 + 1e-5 = 0.10001 s; the bf16 weights' all-gather as before.
  CHECK(sc[0].grad_reduce_s == Approx(0.20002).epsilon(1e-12));
}

TEST_CASE("with model chunks the reserve is counted once per GPU, on its first chunk") {
  const Model m = toy_model(4);
  const AnalyticCostModel cost(round_params());
  ParallelConfig pc;
  pc.tp = 1;
  pc.pp = 2;
  pc.dp = 1;
  pc.vpp = 2;
  // Stages 0 and 2 on pipeline rank 0 (GPU 0), 1 and 3 on rank 1 (GPU 1).
  const std::vector<StageCost> sc =
      stage_costs(m, toy_work(), split_layers(m, 4, {1, 1, 1, 1}), pc, toy_cluster(), cost, {0, 1, 0, 1});
  REQUIRE(sc.size() == 4);
  CHECK(sc[0].reserved_bytes == 1e9);
  CHECK(sc[1].reserved_bytes == 1e9);
  CHECK(sc[2].reserved_bytes == 0);
  CHECK(sc[3].reserved_bytes == 0);
  // dp = 1: nothing to reduce. tp = 1: the block's all-reduce is free, forward 20 ms.
  CHECK(sc[1].grad_reduce_s == 0);
  CHECK(sc[1].forward_s == Approx(0.02).epsilon(1e-12));
  CHECK(sc[2].model_state_bytes == Approx(2e8 * 18).epsilon(1e-15));
}

TEST_CASE("on the ideal cluster communication is free and compute is not") {
  const Model m = toy_model(4);
  const AnalyticCostModel cost(round_params());
  Cluster ideal = toy_cluster();
  ideal.ideal = true;
  ParallelConfig pc;
  pc.tp = 2;
  pc.pp = 2;
  pc.dp = 2;
  const std::vector<StageCost> sc = stage_costs(m, toy_work(), split_layers(m, 2, {2, 2}), pc, ideal, cost, {0, 2});
  CHECK(sc[0].forward_s == Approx(0.002 + 2 * 0.02).epsilon(1e-12));  // no all-reduce
  CHECK(sc[0].grad_reduce_s == 0);
  CHECK(sc[0].optimizer_s == Approx(0.015).epsilon(1e-12));
  CHECK(group_link(ideal, 0, 4, 2).bandwidth_bytes_per_s == std::numeric_limits<double>::infinity());
}

TEST_CASE("a group's link is the slowest hop of its ring") {
  const Cluster c = toy_cluster();
  // GPUs 0, 1, 2, 3 share node 0: NVLink.
  CHECK(group_link(c, 0, 1, 4).bandwidth_bytes_per_s == 1e11);
  CHECK(group_link(c, 0, 1, 4).latency_s == 1e-6);
  // GPUs 2, 3, 4, 5 span nodes 0 and 1, two in each: the network hop decides, on two ports (rails).
  CHECK(group_link(c, 2, 1, 4).bandwidth_bytes_per_s == 2e10);
  CHECK(group_link(c, 2, 1, 4).latency_s == 1e-5);
  // GPUs 0 and 4, one in each node: one port.
  CHECK(group_link(c, 0, 4, 2).bandwidth_bytes_per_s == 1e10);
  // GPUs 0 .. 7, four in each node: four ports, 4e10, under NVLink's 1e11.
  CHECK(group_link(c, 0, 1, 8).bandwidth_bytes_per_s == 4e10);
  // One rank: no link needed.
  CHECK(group_link(c, 0, 8, 1).latency_s == 0);
}

TEST_CASE("overlapped reduction: Megatron's buckets of max(40M, 1M x dp) parameters, each reduced alone") {
  ParallelConfig pc = toy_parallel(true, true);
  const std::vector<StageCost> sc = toy_stage_costs(pc);
  // 5e8 parameters in buckets of 4e7: 13. Each reduce-scatters 5e8 x 4 / 13 bytes at 5e9 B/s (dp 2:
  // half of it), 1e-5 s latency; the all-gather of 5e8 x 2 bytes follows the last, 0.10001 s.
  CHECK(sc[0].grad_buckets == 13);
  CHECK(sc[0].grad_bucket_s == Approx(0.5 * 2e9 / 13 / 5e9 + 1e-5).epsilon(1e-12));
  CHECK(sc[0].grad_gather_s == Approx(0.10001).epsilon(1e-12));
  CHECK(sc[0].grad_reduce_s == Approx(13 * sc[0].grad_bucket_s + sc[0].grad_gather_s).epsilon(1e-12));
  pc.bucket_parameters = 1e8;
  CHECK(toy_stage_costs(pc)[0].grad_buckets == 5);
  pc.dp = 1;
  CHECK(toy_stage_costs(pc)[0].grad_reduce_s == 0);
}

TEST_CASE("ZeRO 0-3 model state per parameter: 2 + 4 + 12 bytes, sharded over dp from each level on") {
  const AnalyticCostModel megatron;  // bf16 weights, fp32 gradients (Megatron keeps them), 12 B of Adam
  CHECK(megatron.model_state_bytes_per_parameter(8, 0, {}) == 18);
  CHECK(megatron.model_state_bytes_per_parameter(8, 1, {}) == 2 + 4 + 12.0 / 8);
  CHECK(megatron.model_state_bytes_per_parameter(8, 2, {}) == 2 + 16.0 / 8);
  CHECK(megatron.model_state_bytes_per_parameter(8, 3, {}) == 18.0 / 8);
  // The ZeRO paper's own accounting (Rajbhandari et al. 2020, Figure 1): 2 + 2 + K with K = 12.
  AnalyticCostParams paper;
  paper.grad_bytes_per_parameter = 2;
  const AnalyticCostModel zero(paper);
  CHECK(zero.model_state_bytes_per_parameter(64, 0, {}) == 16);
  CHECK(zero.model_state_bytes_per_parameter(64, 1, {}) == 4 + 12.0 / 64);
  CHECK(zero.model_state_bytes_per_parameter(64, 2, {}) == 2 + 14.0 / 64);
  CHECK(zero.model_state_bytes_per_parameter(64, 3, {}) == 16.0 / 64);
  // --grad-reduce-in-bf16: Megatron's gradient buffer in bf16, 2 bytes where it kept 4.
  CHECK(megatron.model_state_bytes_per_parameter(8, 1, {true, std::nullopt}) == 2 + 2 + 12.0 / 8);
  CHECK(megatron.model_state_bytes_per_parameter(8, 2, {true, std::nullopt}) == 2 + 14.0 / 8);
  CHECK(zero.model_state_bytes_per_parameter(64, 1, {true, std::nullopt}) == 4 + 12.0 / 64);  // 2 bytes already: bf16 stays 2
}

TEST_CASE("the precision-aware optimizer's narrower state in a stage's memory and optimizer step") {
  ParallelConfig pc = toy_parallel(true, false);
  pc.optimizer_precision.precision_aware = true;
  pc.optimizer_precision.exp_avg = StateDtype::Bf16;
  pc.optimizer_precision.exp_avg_sq = StateDtype::Bf16;
  const std::vector<StageCost> sc = toy_stage_costs(pc);
  // 5e8 x (2 + 4 + 6 / 2) plus the 1e9 reserve, where fp32 moments and master weights keep 7e9.
  CHECK(sc[0].model_state_bytes == Approx(5.5e9).epsilon(1e-15));
  // 2.5e8 parameters a GPU x 20 bytes at 0.5 TB/s, where Adam's 30 bytes take 0.015 s.
  CHECK(sc[0].optimizer_s == Approx(0.01).epsilon(1e-12));
  CHECK(state_bytes_per_parameter(AnalyticCostModel(round_params()), pc) == 2 + 4 + 3);
}

TEST_CASE("ZeRO-3: weights gathered per layer before F (and B when resharded), hidden behind compute") {
  // pp 2: torchtitan's default keeps the gathered weights through the step, gathered once: F and B keep
  // their compute times, the all-gather of 5e8 x 2 bytes (0.10001 s) follows the reduction as the
  // distributed optimizer's does, and a bf16 copy of every parameter stays. PyTorch's pipelining syncs
  // gradients only at the last micro-batch: they accumulate whole (4 bytes, not 4 / 2) and are reduced
  // once: 5e8 x (18 / 2 + 2 + 2) + 1e9.
  ParallelConfig pc = toy_parallel(true, true);
  pc.zero = 3;
  std::vector<StageCost> sc = toy_stage_costs(pc);
  CHECK(sc[0].forward_s == Approx(0.046004).epsilon(1e-12));
  CHECK(sc[0].backward_input_s == Approx(0.06).epsilon(1e-12));
  CHECK(sc[0].grad_gather_s == Approx(0.10001).epsilon(1e-12));
  CHECK(sc[0].model_state_bytes == Approx(5e8 * 13 + 1e9).epsilon(1e-12));
  CHECK(sc[0].working_bytes == 0);
  CHECK_FALSE(sc[0].reduce_every_microbatch);
  // Resharded after forward: stage 0 = embedding (1e8 parameters) + 2 blocks (2e8 each), each layer's bf16
  // all-gather over dp 2 at 5e9 B/s 0.5 x 2e8 / 5e9 + 1e-5 = 0.02001 s and 0.04001 s, 0.10003 s in all.
  // F (0.046004 s) waits for the first and cannot hide the other 0.08002 s; B starts from the last block
  // (0.04001 s waited, 0.06002 s behind 0.06 s of compute). Nothing is gathered after the step; the
  // working set gains the largest layer gathered twice (prefetch) and its fp32 gradient.
  pc.reshard_after_forward = ParallelConfig::Reshard::Always;
  sc = toy_stage_costs(pc);
  CHECK(sc[0].forward_s == Approx(0.08002 + 0.02001).epsilon(1e-12));
  CHECK(sc[0].backward_input_s == Approx(0.06002 + 0.04001).epsilon(1e-12));
  CHECK(sc[0].grad_gather_s == 0);
  CHECK(sc[0].model_state_bytes == Approx(5e8 * 11 + 1e9).epsilon(1e-12));
  CHECK(sc[0].working_bytes == 2e8 * (2 * 2 + 4));
  // Without pp, FSDP reduce-scatters every micro-batch's gradients and keeps only its shard: 18 / 2.
  pc.pp = 1;
  const Model whole = toy_model(4);
  const std::vector<StageCost> one = stage_costs(whole, toy_work(), split_layers(whole, 1, {4}), pc, toy_cluster(),
                                                 AnalyticCostModel(round_params()), {0});
  CHECK(one[0].reduce_every_microbatch);
  CHECK(one[0].model_state_bytes == Approx(one[0].parameters * 9 + 1e9).epsilon(1e-12));
  pc.pp = 2;
  pc.zero = 2;
  sc = toy_stage_costs(pc);
  CHECK(sc[0].forward_s == Approx(0.046004).epsilon(1e-12));
  CHECK(sc[0].reduce_every_microbatch);
  CHECK_FALSE(toy_stage_costs(toy_parallel(true, true))[0].reduce_every_microbatch);
}

TEST_CASE("ZeRO-3 with pp and gradient sync every micro-batch: no whole gradient kept, a reduction per micro-batch") {
  // The Llama 3 paper's FSDP under pp: weights kept gathered (never resharded), gradients reduce-scattered
  // into fp32 shards every micro-batch. The state loses the whole fp32 gradient the default keeps under pp:
  // 5e8 x (18 / 2 + 2) + 1e9 where the default keeps 5e8 x 13 + 1e9; the working set gains one layer's
  // whole gradient before its reduce-scatter (the largest, a 2e8-parameter block: 2e8 x 4 bytes).
  ParallelConfig pc = toy_parallel(true, true);
  pc.zero = 3;
  pc.reshard_after_forward = ParallelConfig::Reshard::Never;
  pc.fsdp_grad_sync = ParallelConfig::GradSync::EveryMicrobatch;
  std::vector<StageCost> sc = toy_stage_costs(pc);
  CHECK(sc[0].reduce_every_microbatch);
  CHECK(sc[0].model_state_bytes == Approx(5e8 * 11 + 1e9).epsilon(1e-12));
  CHECK(sc[0].working_bytes == 2e8 * 4);
  CHECK(sc[0].forward_s == Approx(0.046004).epsilon(1e-12));
  CHECK(sc[0].grad_gather_s == Approx(0.10001).epsilon(1e-12));
  // last-microbatch without pp: FSDP's no-sync accumulation, the whole gradient kept and reduced once.
  pc.fsdp_grad_sync = ParallelConfig::GradSync::LastMicrobatch;
  pc.pp = 1;
  const Model whole = toy_model(4);
  const std::vector<StageCost> one = stage_costs(whole, toy_work(), split_layers(whole, 1, {4}), pc, toy_cluster(),
                                                 AnalyticCostModel(round_params()), {0});
  CHECK_FALSE(one[0].reduce_every_microbatch);
  CHECK(one[0].model_state_bytes == Approx(one[0].parameters * 13 + 1e9).epsilon(1e-12));
  CHECK(one[0].working_bytes == 0);
  // Only ZeRO-3 reads it: ZeRO-2 reduces every micro-batch's gradients whatever it says, ZeRO-1 once.
  pc.zero = 2;
  CHECK(pc.gradients_sharded_each_microbatch());
  pc.zero = 1;
  pc.fsdp_grad_sync = ParallelConfig::GradSync::EveryMicrobatch;
  CHECK_FALSE(pc.gradients_sharded_each_microbatch());
}

TEST_CASE("hybrid sharding: reduce-scatter in the shard group, all-reduce of the shard across replicas") {
  // dp 4 in shard groups of 2 (torchtitan's HSDP 2 x 2, Megatron's 2 distributed-optimizer instances): dp
  // peers are tp x pp = 4 GPUs apart, on other nodes. 5e8 parameters in 13 buckets of 4e7; each bucket's
  // 2e9 / 13 bytes are reduce-scattered over 2 ranks (0.5 x 2e9 / 13 / 5e9 + 1e-5 s), then each replica
  // all-reduces its half with the other group's (2 x (0.5 x 1e9 / 13 / 5e9 + 1e-5) s). The optimizer state
  // is sharded over 2: 2 + 4 + 12 / 2 bytes a parameter.
  ParallelConfig pc = toy_parallel(true, true);
  pc.dp = 4;
  pc.dp_shard = 2;
  CHECK(pc.shard_group() == 2);
  CHECK(pc.dp_replicas() == 2);
  const std::vector<StageCost> sc = toy_stage_costs(pc);
  CHECK(sc[0].grad_buckets == 13);
  CHECK(sc[0].grad_bucket_s ==
        Approx(0.5 * 2e9 / 13 / 5e9 + 1e-5 + 2 * (0.5 * 1e9 / 13 / 5e9 + 1e-5)).epsilon(1e-12));
  CHECK(sc[0].grad_gather_s == Approx(0.5 * 5e8 * 2 / 5e9 + 1e-5).epsilon(1e-12));
  CHECK(sc[0].model_state_bytes == Approx(5e8 * (2 + 4 + 12.0 / 2) + 1e9).epsilon(1e-12));
  // Without replicas: everything over the 4.
  pc.dp_shard = 0;
  CHECK(toy_stage_costs(pc)[0].model_state_bytes == Approx(5e8 * (2 + 4 + 12.0 / 4) + 1e9).epsilon(1e-12));
}

TEST_CASE("overlapped parameter all-gather (--overlap-param-gather) hides behind the next step's first forward of the stage") {
  // Stage 0's gather of 5e8 x 2 bytes takes 0.10001 s; its forward 0.046004 s covers that much of it, and
  // at least the first of the 13 buckets is waited for: max(0.10001 / 13, 0.10001 - 0.046004).
  ParallelConfig pc = toy_parallel(true, true);
  pc.overlap_param_gather = true;
  std::vector<StageCost> sc = toy_stage_costs(pc);
  CHECK(sc[0].grad_gather_s == Approx(0.10001 - 0.046004).epsilon(1e-12));
  // Megatron-LM takes it only with --overlap-grad-reduce: one bucket, all of it after the reduction.
  pc.overlap_grad_reduce = false;
  CHECK(toy_stage_costs(pc)[0].grad_gather_s == Approx(0.10001).epsilon(1e-12));
}
