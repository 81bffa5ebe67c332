// Megatron-Core's selective recomputation by module (core/module_recompute.cpp): what each module drops from a
// block's stored activations and what B reruns, in closed form, against Megatron-LM d98e8a6
// (megatron/core/transformer/transformer_config.py's recompute_modules, transformer_layer.py,
// multi_latent_attention.py, moe/experts.py, moe/shared_experts.py; the layer spec of
// megatron/core/models/gpt/gpt_layer_specs.py decides which norms are modules of their own).
#include <catch2/catch.hpp>

#include "core/layer_work.hpp"
#include "core/model.hpp"
#include "core/recompute_modules.hpp"
#include "../error_text.hpp"

using namespace pw;

namespace {

Workload selective(const std::string& modules, int tp = 1) {
  Workload w;
  w.seq_len = 4096;
  w.tp = tp;
  w.sequence_parallel = tp > 1;
  w.recompute = Recompute::Selective;
  w.recompute_modules = recompute_modules_from_string(modules);
  return w;
}

Workload none(int tp = 1) {
  Workload w = selective("core_attn", tp);
  w.recompute = Recompute::None;
  return w;
}

LayerWork block_work(const Model& m, int block, const Workload& w) {
  return layer_work(m, m.layers[static_cast<size_t>(m.block_index(block))], w);
}

}  // namespace

TEST_CASE("recompute modules read as Megatron names them, in its order, and refuse what is not modelled") {
  CHECK(to_string(recompute_modules_from_string("elementwise,layernorm")) == "layernorm,elementwise");
  CHECK(RecomputeModules{}.is_default());
  CHECK(module_names(RecomputeModules{}) == std::vector<std::string>{"core_attn"});
  const RecomputeModules m = recompute_modules_from_string("layernorm, moe_act");
  CHECK(m.has(RecomputeModule::Layernorm));
  CHECK(m.has(RecomputeModule::MoeAct));
  CHECK_FALSE(m.has(RecomputeModule::CoreAttn));  // a list replaces the default, as in Megatron
  CHECK(to_string(m) == "moe_act,layernorm");
  CHECK(recompute_modules_from_string(to_string(m)) == m);
  CHECK(to_string(recompute_modules_from_string("shared_experts,mlp,mla_up_proj,core_attn")) ==
        "core_attn,mla_up_proj,mlp,shared_experts");
  CHECK(bad_input([] { recompute_modules_from_string("moe"); }) ==
        "--recompute-modules: moe is a Megatron module pipewright does not model; give core_attn, moe_act, layernorm, "
        "mla_up_proj, mlp, shared_experts or elementwise");
  CHECK(bad_input([] { recompute_modules_from_string("core_attn,attn"); }) ==
        "--recompute-modules: 'attn' is not a module; give core_attn, moe_act, layernorm, mla_up_proj, mlp, "
        "shared_experts or elementwise");
  CHECK(bad_input([] { recompute_modules_from_string(" , "); }) ==
        "--recompute-modules: the list is empty; give core_attn, moe_act, layernorm, mla_up_proj, mlp, shared_experts "
        "or elementwise");
}

TEST_CASE("gpt-oss's layernorm and moe_act: the pre-MLP norm and the experts' activation rerun in B") {
  const Model m = model_preset("gpt-oss-120b");
  const double n = 4096, h = 2880, f = 2880, k = 4;
  const double pairs = n * k;
  const LayerWork kept = block_work(m, 0, none());
  const LayerWork lw = block_work(m, 0, selective("layernorm,moe_act"));
  // The input norm is fused into the QKV linear (Transformer Engine's LayerNormLinear): only the MoE block's
  // pre-MLP norm is a module; its bf16 output and fc2's input (the activation's output) are dropped.
  const double dropped = 2 * n * h + 2 * pairs * f;
  CHECK(kept.activation_bytes - lw.activation_bytes == Approx(dropped).epsilon(1e-12));
  CHECK(lw.working_bytes - kept.working_bytes == Approx(dropped).epsilon(1e-12));
  // B reruns the norm (read x, write y) and the gated activation (read gate and up, write the product).
  CHECK(lw.recompute.memory_bytes == 2 * 2 * n * h + 3 * 2 * pairs * f);
  CHECK(lw.recompute.flops() == 0);
  CHECK(lw.recompute.kernels == 2);
  // Both dropped tensors are W inputs (the router's and fc2's): they leave what waits for W too, as under full
  // recomputation, so fp8 halves only the W inputs still stored: a dropped one saves its fp8 copy, 1 byte.
  CHECK(kept.weight_grad_bytes - lw.weight_grad_bytes == Approx(dropped).epsilon(1e-12));
  Workload fp8 = selective("layernorm,moe_act");
  fp8.precision = Precision::Fp8;
  Workload fp8_kept = none();
  fp8_kept.precision = Precision::Fp8;
  const LayerWork fp8_lw = block_work(m, 0, fp8);
  CHECK(block_work(m, 0, fp8_kept).activation_bytes - fp8_lw.activation_bytes == Approx(dropped / 2).epsilon(1e-12));
  CHECK(lw.forward.memory_bytes == kept.forward.memory_bytes);
  // Megatron's default, the attention core alone, rebuilds nothing under fused attention.
  const LayerWork core = block_work(m, 0, selective("core_attn"));
  CHECK(core.activation_bytes == kept.activation_bytes);
  CHECK(core.recompute.kernels == 0);
}

TEST_CASE("DeepSeek-V3's mla_up_proj, mlp and shared_experts, and MLA's input norm under layernorm") {
  const Model m = model_preset("deepseek-v3");
  const double n = 4096, h = 7168, H = 128, t = 2;
  const LayerWork dense_kept = block_work(m, 0, none(2));
  // The dense first blocks: mla_up_proj drops Q, K (192 wide a head) and V (128) and reruns the q and kv up
  // projections with the rotary part; mlp drops the SwiGLU's gate, up and product and reruns the MLP.
  const LayerWork dense = block_work(m, 0, selective("mla_up_proj,mlp", 2));
  const double qkv = 2 * n * (H * 192 + H * 192 + H * 128) / t;
  const double mlp = 3 * 2 * n * 18432 / t;
  CHECK(dense_kept.activation_bytes - dense.activation_bytes == Approx(qkv + mlp).epsilon(1e-12));
  const double up = 2 * n * (1536 * H * 192 + 512 * H * 256) / t;
  const double mlp_gemms = 2 * n * (h * 2 * 18432 + 18432 * h) / t;
  CHECK(dense.recompute.gemm_flops == Approx(up + mlp_gemms).epsilon(1e-12));
  // The MLP's sequence-parallel all-gather and reduce-scatter run again.
  CHECK(dense.recompute.collectives.size() == 2);
  // MoE blocks: mlp is the dense MLP only (transformer_layer.py), so it changes nothing there; shared_experts
  // drops the shared expert's gate, up and product (2 x 2048 + 2048 wide) and reruns it.
  const LayerWork moe_kept = block_work(m, 3, none(2));
  CHECK(block_work(m, 3, selective("mlp", 2)).activation_bytes == moe_kept.activation_bytes);
  const LayerWork shared = block_work(m, 3, selective("shared_experts", 2));
  CHECK(moe_kept.activation_bytes - shared.activation_bytes == Approx(2 * n * (2 * 2048 + 2048) / t).epsilon(1e-12));
  CHECK(shared.recompute.gemm_flops == Approx(2 * n * (h * 2 * 2048 + 2048 * h) / t).epsilon(1e-12));
  // layernorm: MLA's input norm is its own module (the down projections are not LayerNormLinear), and so is
  // the MoE block's pre-MLP norm; each drops one sequence-parallel shard of the hidden state.
  CHECK(moe_kept.activation_bytes - block_work(m, 3, selective("layernorm", 2)).activation_bytes ==
        Approx(2 * 2 * n * h / t).epsilon(1e-12));
  CHECK(dense_kept.activation_bytes - block_work(m, 0, selective("layernorm", 2)).activation_bytes ==
        Approx(2 * n * h / t).epsilon(1e-12));
}

TEST_CASE("without core_attn the unfused scores stay, with it they are rebuilt") {
  const Model m = model_preset("mixtral-8x7b");
  Workload unfused_none = none();
  unfused_none.flash_attention = false;
  Workload act = selective("moe_act");
  act.flash_attention = false;
  Workload both = selective("core_attn,moe_act");
  both.flash_attention = false;
  const double n = 4096, pairs = n * 2, f = 14336, scores = 2 * 2 * 32 * 4096.0 * 4096;
  const LayerWork kept = block_work(m, 0, unfused_none);
  CHECK(kept.activation_bytes - block_work(m, 0, act).activation_bytes == Approx(2 * pairs * f).epsilon(1e-12));
  CHECK(kept.activation_bytes - block_work(m, 0, both).activation_bytes ==
        Approx(2 * pairs * f + scores).epsilon(1e-12));
  CHECK(block_work(m, 0, both).recompute.attention_flops > 0);
  CHECK(block_work(m, 0, act).recompute.attention_flops == 0);
}

TEST_CASE("pipewright's own layers rerun the attention core only: other modules need the gpu accounting") {
  const Model m = model_preset("mixtral-8x7b");
  Workload w = selective("moe_act");
  w.memory = MemoryAccounting::CpuFloat32;
  CHECK(bad_input([&] { block_work(m, 0, w); }) ==
        "--recompute-modules: pipewright's own layers rerun the attention core only, so run and the cpu-float32 memory "
        "accounting take core_attn alone, not moe_act; give --recompute-modules core_attn");
}

TEST_CASE("activation_func_fp8_input_store: a SwiGLU's input kept in fp8, cast there and back") {
  // DeepSeek-V3 at tp 1: its dense blocks' SwiGLU is 18,432 wide, its routed experts' 2,048 (8 copies a token),
  // its shared expert's 2,048. Megatron-Core keeps gate and up (2 f) at 1 byte instead of 2, and pays a cast of
  // 3 bytes an element after F's activation and before B's (fused_bias_swiglu.py's .to(float8_e4m3fn) and back).
  const Model m = model_preset("deepseek-v3");
  const double n = 4096, pairs = n * 8;
  Workload fp8_store = none();
  fp8_store.activation_fp8_input_store = true;
  const LayerWork dense_kept = block_work(m, 0, none()), dense = block_work(m, 0, fp8_store);
  CHECK(dense_kept.activation_bytes - dense.activation_bytes == Approx(n * 2 * 18432).epsilon(1e-12));
  CHECK(dense.forward.memory_bytes - dense_kept.forward.memory_bytes == Approx(3 * n * 2 * 18432).epsilon(1e-12));
  CHECK(dense.backward_input.memory_bytes - dense_kept.backward_input.memory_bytes ==
        Approx(3 * n * 2 * 18432).epsilon(1e-12));
  CHECK(dense.forward.kernels == dense_kept.forward.kernels + 1);
  const LayerWork moe_kept = block_work(m, 3, none()), moe = block_work(m, 3, fp8_store);
  const double cast = pairs * 2 * 2048 + n * 2 * 2048;  // routed copies' and shared expert's gate and up
  CHECK(moe_kept.activation_bytes - moe.activation_bytes == Approx(cast).epsilon(1e-12));
  CHECK(moe.forward.memory_bytes - moe_kept.forward.memory_bytes == Approx(3 * cast).epsilon(1e-12));
  // moe_act reruns the activation in B from the fp8 input: its cast runs again there.
  Workload act = selective("moe_act");
  act.activation_fp8_input_store = true;
  CHECK(block_work(m, 3, act).recompute.memory_bytes - block_work(m, 3, selective("moe_act")).recompute.memory_bytes ==
        Approx(3 * pairs * 2 * 2048).epsilon(1e-12));
  // Megatron-Core refuses it for any other activation (resolve(), tested in the CLI); the work ignores it there.
  const Model gelu = model_preset("gpt3-175b");
  Workload gelu_store = none();
  gelu_store.activation_fp8_input_store = true;
  CHECK(layer_work(gelu, gelu.layers[1], gelu_store).activation_bytes == layer_work(gelu, gelu.layers[1], none()).activation_bytes);
}

TEST_CASE("elementwise: the norms' and activations' outputs rebuilt in B, every GEMM and attention output kept") {
  // Llama 3 405B at tp 8 with sequence parallelism: hidden 16,384, SwiGLU 53,248 wide. A backward written by hand
  // (LLaMA's) keeps the norms' inputs, Q, K, V, the attention output, gate and up; it drops the two norms'
  // outputs (a sequence-parallel shard each) and the SwiGLU's product, and B rebuilds them before it runs.
  const Model m = model_preset("llama3-405b");
  const double n = 4096, h = 16384, f = 53248, t = 8;
  const LayerWork kept = block_work(m, 0, none(8));
  const LayerWork lw = block_work(m, 0, selective("elementwise", 8));
  const double norms = 2 * 2 * n * h / t, product = 2 * n * f / t;
  CHECK(kept.activation_bytes - lw.activation_bytes == Approx(norms + product).epsilon(1e-12));
  CHECK(lw.working_bytes - kept.working_bytes == Approx(norms + product).epsilon(1e-12));
  // All three are GEMM inputs W reads (QKV's, fc1's, fc2's): nothing dropped at F waits for W.
  CHECK(kept.weight_grad_bytes - lw.weight_grad_bytes == Approx(norms + product).epsilon(1e-12));
  // B's extra work: two norms (read x, write y) and the SwiGLU (read gate and up, write the product); no GEMM.
  CHECK(lw.recompute.memory_bytes == Approx(2 * (2 * 2 * n * h / t) + 3 * 2 * n * f / t).epsilon(1e-12));
  CHECK(lw.recompute.flops() == 0);
  CHECK(lw.recompute.kernels == 3);
  CHECK(lw.recompute.collectives.empty());
  // The block keeps 21.3 of the 31.8 bytes a token and hidden unit it kept (Korthikanti's 34 without dropout,
  // SwiGLU and grouped-query K and V): a third less.
  CHECK(kept.activation_bytes / (n * h / t) == Approx(31.78).epsilon(1e-3));
  CHECK(lw.activation_bytes / (n * h / t) == Approx(21.28).epsilon(1e-3));
  // With mlp the whole MLP goes already: elementwise adds the attention's input norm alone, not the product twice.
  const LayerWork mlp = block_work(m, 0, selective("mlp", 8));
  CHECK(mlp.activation_bytes - block_work(m, 0, selective("mlp,elementwise", 8)).activation_bytes ==
        Approx(2 * n * h / t + 2 * n * h / t).epsilon(1e-12));
}

TEST_CASE("elementwise in an MoE block: both norms, the routed and the shared experts' activations") {
  // DeepSeek-V3's MoE block at tp 2 (sp): the experts' products as moe_act drops them, the shared expert's product
  // (2,048 wide), and both norms' outputs; with layernorm or moe_act listed too nothing is dropped twice.
  const Model m = model_preset("deepseek-v3");
  const double n = 4096, h = 7168, t = 2;
  const LayerWork kept = block_work(m, 3, none(2));
  const LayerWork lw = block_work(m, 3, selective("elementwise", 2));
  const double experts = kept.activation_bytes - block_work(m, 3, selective("moe_act", 2)).activation_bytes;
  const double norms = 2 * 2 * n * h / t, shared = 2 * n * 2048 / t;
  CHECK(kept.activation_bytes - lw.activation_bytes == Approx(experts + norms + shared).epsilon(1e-12));
  CHECK(block_work(m, 3, selective("layernorm,moe_act,elementwise", 2)).activation_bytes ==
        Approx(lw.activation_bytes).epsilon(1e-12));
  CHECK(block_work(m, 3, selective("layernorm,moe_act,elementwise", 2)).recompute.memory_bytes ==
        Approx(lw.recompute.memory_bytes).epsilon(1e-12));
  // shared_experts drops the shared MLP whole: elementwise then adds the norms and the routed experts only.
  const LayerWork whole_shared = block_work(m, 3, selective("shared_experts", 2));
  CHECK(whole_shared.activation_bytes - block_work(m, 3, selective("shared_experts,elementwise", 2)).activation_bytes ==
        Approx(experts + norms).epsilon(1e-12));
}
