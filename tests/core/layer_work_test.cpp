#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "core/layer_work.hpp"
#include "core/model.hpp"
#include "core/workload.hpp"

using namespace pw;

namespace {

Workload workload(int tp, bool sp, Recompute r = Recompute::None, int b = 1, int s = 0) {
  Workload w;
  w.micro_batch_size = b;
  w.seq_len = s;
  w.tp = tp;
  w.sequence_parallel = sp;
  w.recompute = r;
  w.flash_attention = false;  // Narayanan's and Korthikanti's counts store the s x s scores
  return w;
}

const Layer& block(const Model& m) { return m.layers[m.block_index(0)]; }

int count(const PhaseWork& p, CollectiveKind kind, double bytes) {
  int n = 0;
  for (const Collective& c : p.collectives) n += c.kind == kind && c.bytes == bytes ? 1 : 0;
  return n;
}

// GPT-3 175B at its own sequence length: s = 2048, h = 12288, a = 96, L = 96, V = 51200.
constexpr std::int64_t s = 2048, h = 12288, a = 96, L = 96, V = 51200;

}  // namespace

TEST_CASE("recompute modes read and print") {
  CHECK(std::string(to_string(Recompute::None)) == "none");
  CHECK(std::string(to_string(Recompute::Selective)) == "selective");
  CHECK(std::string(to_string(Recompute::Full)) == "full");
  CHECK(recompute_from_string("full") == Recompute::Full);
  CHECK(recompute_from_string("selective") == Recompute::Selective);
  CHECK(recompute_from_string("none") == Recompute::None);
  try {
    recompute_from_string("some");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::BadInput);
    CHECK(std::string(e.what()) == "--recompute: unknown mode 'some'; use none, selective, full or per-stage");
  }
}

TEST_CASE("GPT-3 175B model and hardware FLOPs per sequence follow Narayanan") {
  const Model m = model_preset("gpt3-175b");
  // Model FLOPs (b = 1): 72 L s h^2 (1 + s/(6h) + V/(12 h L)) = 72 L s h^2 + 12 L s^2 h + 6 s h V.
  const std::int64_t model = 72 * L * s * h * h + 12 * L * s * s * h + 6 * s * h * V;
  CHECK(model_flops_per_microbatch(m, workload(1, false)) == static_cast<double>(model));
  CHECK(model_flops_per_microbatch(m, workload(1, false)) ==
        Approx(72.0 * L * s * h * h * (1 + s / (6.0 * h) + V / (12.0 * h * L))).epsilon(1e-12));
  // Independent of tp (all ranks together) and of recomputation.
  CHECK(model_flops_per_microbatch(m, workload(8, true, Recompute::Full)) == static_cast<double>(model));

  // Hardware FLOPs with full recompute: 96 L s h^2 (1 + s/(6h) + V/(16 h L)) = 96 L s h^2 + 16 L s^2 h + 6 s h V.
  const std::int64_t hardware = 96 * L * s * h * h + 16 * L * s * s * h + 6 * s * h * V;
  CHECK(hardware_flops_per_microbatch(m, workload(1, false, Recompute::Full)) == static_cast<double>(hardware));
  CHECK(hardware_flops_per_microbatch(m, workload(8, true, Recompute::Full)) ==
        Approx(96.0 * L * s * h * h * (1 + s / (6.0 * h) + V / (16.0 * h * L))).epsilon(1e-12));
  // Without recompute hardware = model; selective adds one forward attention core per layer: 4 L s^2 h.
  CHECK(hardware_flops_per_microbatch(m, workload(1, false)) == static_cast<double>(model));
  CHECK(hardware_flops_per_microbatch(m, workload(1, false, Recompute::Selective)) ==
        static_cast<double>(model + 4 * L * s * s * h));
  // Micro-batch size scales linearly.
  CHECK(model_flops_per_microbatch(m, workload(1, false, Recompute::None, 4)) == 4.0 * model);
}

TEST_CASE("a GPT block splits F, B and W as Narayanan counts") {
  const Model m = model_preset("gpt3-175b");
  const LayerWork w = layer_work(m, block(m), workload(1, false));
  // F: 24 s h^2 GEMM + 4 s^2 h attention; B: the same GEMMs and twice the attention; W: the GEMMs.
  CHECK(w.forward.gemm_flops == static_cast<double>(24 * s * h * h));
  CHECK(w.forward.attention_flops == static_cast<double>(4 * s * s * h));
  CHECK(w.backward_input.gemm_flops == static_cast<double>(24 * s * h * h));
  CHECK(w.backward_input.attention_flops == static_cast<double>(8 * s * s * h));
  CHECK(w.backward_weight.gemm_flops == static_cast<double>(24 * s * h * h));
  CHECK(w.backward_weight.attention_flops == 0);
  CHECK(w.recompute.flops() == 0);
  CHECK(w.recompute.kernels == 0);
  // Forward elementwise bytes: two norms (read + write, 2 x 4 s h), two bias-dropout-adds (read two,
  // write one, 1-byte mask: 2 x 7 s h), GeLU on 4h (read + write: 16 s h), softmax (4 a s^2) and its
  // dropout (5 a s^2): 38 s h + 9 a s^2.
  CHECK(w.forward.memory_bytes == static_cast<double>(38 * s * h + 9 * a * s * s));
  // Kernels: norm, QKV, QK^T, softmax, dropout, AV, out-proj, add, norm, up, GeLU, down, add.
  CHECK(w.forward.kernels == 13);
  CHECK(w.backward_weight.kernels == 4);
  CHECK(w.forward.collectives.empty());

  // tp divides every FLOP exactly.
  const LayerWork w8 = layer_work(m, block(m), workload(8, true));
  CHECK(w8.forward.flops() * 8 == w.forward.flops());
  CHECK(w8.backward_input.flops() * 8 == w.backward_input.flops());
  CHECK(w8.backward_weight.flops() * 8 == w.backward_weight.flops());
}

TEST_CASE("GPT-3 175B block activations equal Korthikanti's formulas") {
  const Model m = model_preset("gpt3-175b");
  const std::int64_t sbh = s * h;        // b = 1
  const std::int64_t s2 = 5 * a * s * s;  // 5 a s^2 b
  const auto act = [&](int tp, bool sp, Recompute r) { return layer_work(m, block(m), workload(tp, sp, r)).activation_bytes; };
  // No parallelism: s b h (34 + 5 a s / h).
  CHECK(act(1, false, Recompute::None) == static_cast<double>(34 * sbh + s2));
  CHECK(act(1, true, Recompute::None) == static_cast<double>(34 * sbh + s2));  // sp needs tp > 1
  // Tensor parallel t = 8: s b h (10 + 24/t + 5 a s / (h t)).
  CHECK(act(8, false, Recompute::None) == static_cast<double>(10 * sbh + 24 * sbh / 8 + s2 / 8));
  // Tensor + sequence parallel: s b h (34/t + 5 a s / (h t)).
  CHECK(act(8, true, Recompute::None) == static_cast<double>(34 * sbh / 8 + s2 / 8));
  // Selective recompute drops the s^2 term: 34 s b h / t with sp (34 s b h with t = 1).
  CHECK(act(8, true, Recompute::Selective) == static_cast<double>(34 * sbh / 8));
  CHECK(act(1, false, Recompute::Selective) == static_cast<double>(34 * sbh));
  CHECK(act(8, false, Recompute::Selective) == static_cast<double>(10 * sbh + 24 * sbh / 8));
  // Full recompute keeps the layer input: 2 s b h, /t with sp.
  CHECK(act(1, false, Recompute::Full) == static_cast<double>(2 * sbh));
  CHECK(act(8, true, Recompute::Full) == static_cast<double>(2 * sbh / 8));
  CHECK(act(8, false, Recompute::Full) == static_cast<double>(2 * sbh));

  // W keeps the inputs of its four GEMMs: QKV input 2sbh, out-proj input 2sbh, MLP input 2sbh,
  // down-projection input 8sbh (t = 1), part of what is stored.
  const LayerWork w = layer_work(m, block(m), workload(1, false));
  CHECK(w.weight_grad_bytes == static_cast<double>(14 * sbh));
  CHECK(layer_work(m, block(m), workload(8, true)).weight_grad_bytes == static_cast<double>(14 * sbh / 8));
  CHECK(layer_work(m, block(m), workload(8, false)).weight_grad_bytes == static_cast<double>(4 * sbh + 10 * sbh / 8));
  CHECK(layer_work(m, block(m), workload(8, true, Recompute::Full)).weight_grad_bytes == 0);
  // A micro-batch of 4 stores 4 times as much.
  CHECK(layer_work(m, block(m), workload(8, true, Recompute::None, 4)).activation_bytes == 4 * act(8, true, Recompute::None));
}

TEST_CASE("embedding and head store what Korthikanti lists for the first and last stage") {
  const Model m = model_preset("gpt3-175b");
  const std::int64_t sbh = s * h;
  const LayerWork e = layer_work(m, m.layers.front(), workload(8, true));
  CHECK(e.activation_bytes == static_cast<double>(sbh / 8));  // dropout mask s b h / t
  CHECK(e.forward.flops() == 0);
  CHECK(e.forward.memory_bytes > 0);
  CHECK(layer_work(m, m.layers.front(), workload(8, false)).activation_bytes == static_cast<double>(sbh));
  // Head: final norm input 2sbh/t, LM head input 2sbh/t, fp32 logits 4 s b V / t.
  const LayerWork hd = layer_work(m, m.layers.back(), workload(8, true));
  CHECK(hd.activation_bytes == static_cast<double>(2 * sbh / 8 + 2 * sbh / 8 + 4 * s * V / 8));
  CHECK(hd.weight_grad_bytes == static_cast<double>(2 * sbh / 8));
  CHECK(hd.output_bytes == 0);
  // LM head: 2 b s h V forward, the same in B and in W (/t).
  CHECK(hd.forward.gemm_flops == static_cast<double>(2 * s * h * V / 8));
  CHECK(hd.backward_input.gemm_flops == static_cast<double>(2 * s * h * V / 8));
  CHECK(hd.backward_weight.gemm_flops == static_cast<double>(2 * s * h * V / 8));
  // The head is not recomputed.
  CHECK(layer_work(m, m.layers.back(), workload(8, true, Recompute::Full)).recompute.flops() == 0);
  CHECK(layer_work(m, m.layers.front(), workload(8, true, Recompute::Full)).recompute.kernels == 0);
}

TEST_CASE("tp collectives per block, embedding and head") {
  const Model m = model_preset("gpt3-175b");
  const double hidden = 2.0 * s * h;  // 2 b s h bytes
  const LayerWork plain = layer_work(m, block(m), workload(8, false, Recompute::Full));
  CHECK(plain.forward.collectives.size() == 2);
  CHECK(count(plain.forward, CollectiveKind::AllReduce, hidden) == 2);
  CHECK(count(plain.backward_input, CollectiveKind::AllReduce, hidden) == 2);
  CHECK(plain.backward_weight.collectives.empty());
  CHECK(count(plain.recompute, CollectiveKind::AllReduce, hidden) == 2);  // full recompute repeats F

  const LayerWork sp = layer_work(m, block(m), workload(8, true, Recompute::Selective));
  CHECK(sp.forward.collectives.size() == 4);
  CHECK(count(sp.forward, CollectiveKind::AllGather, hidden) == 2);
  CHECK(count(sp.forward, CollectiveKind::ReduceScatter, hidden) == 2);
  CHECK(count(sp.backward_input, CollectiveKind::AllGather, hidden) == 2);
  CHECK(count(sp.backward_input, CollectiveKind::ReduceScatter, hidden) == 2);
  CHECK(sp.recompute.collectives.empty());  // selective: the attention core only
  CHECK(sp.recompute.attention_flops == sp.forward.attention_flops);
  CHECK(sp.recompute.gemm_flops == 0);
  CHECK(sp.recompute.memory_bytes == static_cast<double>(9 * a * s * s / 8));  // softmax 4 + dropout 5

  CHECK(layer_work(m, block(m), workload(1, true)).forward.collectives.empty());

  const LayerWork e = layer_work(m, m.layers.front(), workload(8, false));
  CHECK(e.forward.collectives.size() == 1);
  CHECK(count(e.forward, CollectiveKind::AllReduce, hidden) == 1);
  CHECK(count(layer_work(m, m.layers.front(), workload(8, true)).forward, CollectiveKind::ReduceScatter, hidden) == 1);

  // Vocab-parallel cross-entropy: three all-reduces of one fp32 per token (4 b s bytes).
  const LayerWork hd = layer_work(m, m.layers.back(), workload(8, false));
  CHECK(count(hd.forward, CollectiveKind::AllReduce, 4.0 * s) == 3);
  CHECK(count(hd.backward_input, CollectiveKind::AllReduce, hidden) == 1);
}

TEST_CASE("parameters per tp rank: sharded weights, replicated norms") {
  const Model m = model_preset("gpt3-175b");
  // Block at t = 8: (12 h^2 + 3h QKV bias + 4h up bias) / 8 + out and down biases 2h + two LayerNorms 4h.
  const LayerWork w = layer_work(m, block(m), workload(8, true));
  CHECK(w.parameters == static_cast<double>((12 * h * h + 7 * h) / 8 + 6 * h));
  CHECK(layer_work(m, block(m), workload(1, true)).parameters == static_cast<double>(12 * h * h + 13 * h));
  // Embedding: V h / t + learned positions s h (replicated). Head: final LayerNorm + its V h / t copy.
  CHECK(layer_work(m, m.layers.front(), workload(8, true)).parameters == static_cast<double>(V * h / 8 + s * h));
  CHECK(layer_work(m, m.layers.back(), workload(8, true)).parameters == static_cast<double>(2 * h + V * h / 8));

  // Llama-3 8B block: (h(a hd) + 2h(k hd) + (a hd)h + 3hf) / t + 2h RMSNorm weights.
  const Model l = model_preset("llama3-8b");
  const std::int64_t lh = 4096, kv = 8 * 128, f = 14336;
  CHECK(layer_work(l, block(l), workload(4, true)).parameters ==
        static_cast<double>((2 * lh * lh + 2 * lh * kv + 3 * lh * f) / 4 + 2 * lh));
}

TEST_CASE("Llama GQA and SwiGLU: FLOPs per token and stored activations") {
  const Model m = model_preset("llama3-8b");
  const std::int64_t ls = 8192, lh = 4096, la = 32, hd = 128, k = 8, f = 14336, b = 2;
  const LayerWork w = layer_work(m, block(m), workload(1, false, Recompute::None, b));
  // Forward GEMM FLOPs per token 2 (h (h + 2 k hd) + h h + 3 h f); attention 4 s h per token (full square).
  CHECK(w.forward.gemm_flops == static_cast<double>(b * ls * 2 * (lh * (lh + 2 * k * hd) + lh * lh + 3 * lh * f)));
  CHECK(w.forward.attention_flops == static_cast<double>(b * ls * 4 * ls * lh));
  // Kernels: norm, QKV, rotary, QK^T, softmax, AV, out-proj, add, norm, gate+up, SwiGLU, down, add.
  CHECK(w.forward.kernels == 13);
  // No dropout: norm inputs 4sbh, QKV and MLP inputs 4sbh; Q 2sbh, K and V 2 x 2sb(k hd); out-proj
  // input 2sbh; gate, up and product 3 x 2sbf; scores and softmax output 4 a s^2 b.
  const std::int64_t sb = ls * b;
  const std::int64_t stored = 8 * sb * lh + 2 * sb * lh + 4 * sb * k * hd + 2 * sb * lh + 6 * sb * f + 4 * la * ls * ls * b;
  CHECK(w.activation_bytes == static_cast<double>(stored));
  CHECK(layer_work(m, block(m), workload(8, true, Recompute::None, b)).activation_bytes == static_cast<double>(stored / 8));
  // Without dropout the embedding stores nothing.
  CHECK(layer_work(m, m.layers.front(), workload(1, false)).activation_bytes == 0);
}

TEST_CASE("boundary tensors and explicit layers") {
  const Model m = model_preset("gpt3-175b");
  CHECK(layer_work(m, block(m), workload(1, false)).output_bytes == 2.0 * s * h);
  CHECK(layer_work(m, block(m), workload(8, true)).output_bytes == 2.0 * s * h / 8);
  CHECK(layer_work(m, block(m), workload(8, false)).output_bytes == 2.0 * s * h / 8);  // scatter/gather
  CHECK(layer_work(m, m.layers.front(), workload(4, true)).output_bytes == 2.0 * s * h / 4);
  // The workload's sequence length overrides the model's.
  CHECK(layer_work(m, block(m), workload(1, false, Recompute::None, 1, 1024)).output_bytes == 2.0 * 1024 * h);

  Model x;
  x.name = "x";
  ExplicitCosts c;
  c.forward_s = 0.5;
  c.backward_input_s = 0.7;
  c.backward_weight_s = 0.3;
  c.output_bytes = 10;
  c.activation_bytes = 20;
  c.parameter_bytes = 30;
  x.layers.push_back({"only", LayerKind::Explicit, c});
  const LayerWork w = layer_work(x, x.layers[0], workload(8, true, Recompute::Full, 4));
  CHECK(w.forward_s == 0.5);
  CHECK(w.backward_input_s == 0.7);
  CHECK(w.backward_weight_s == 0.3);
  CHECK(w.output_bytes == 10);
  CHECK(w.activation_bytes == 20);
  CHECK(w.parameters == 15);  // bf16: parameter_bytes / 2
  CHECK(w.forward.flops() == 0);
  CHECK(model_flops_per_microbatch(x, workload(1, false)) == 0);
}

TEST_CASE("tp must divide attention and KV heads") {
  check_tensor_parallel(model_preset("llama3-70b"), 8);
  try {
    check_tensor_parallel(model_preset("llama3-70b"), 16);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) == "--tp: 16 does not divide the 8 KV heads of 'llama3-70b'; use a divisor of 8");
  }
  try {
    check_tensor_parallel(model_preset("gpt3-2.7b"), 3);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()) ==
          "--tp: 3 does not divide the 32 attention heads of 'gpt3-2.7b'; use a divisor of 32");
  }
}

TEST_CASE("every dense GEMM's shape is kept, and the shapes' FLOPs are the phase's dense GEMM FLOPs") {
  // Dense and MoE, tp with and without sp, recompute, fp8, MTP: the table-priced cost model replaces exactly
  // the FLOPs the shapes account for.
  for (const std::string name : {"gpt3-175b", "llama3-70b", "deepseek-v3", "mixtral-8x7b"}) {
    const Model m = model_preset(name);
    for (int tp : {1, 4})
      for (bool sp : {false, true})
        for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
          for (Precision p : {Precision::Bf16, Precision::Fp8}) {
            Workload w = workload(tp, sp, r, 2, 4096);
            w.precision = p;
            w.flash_attention = true;
            for (const Layer& layer : m.layers) {
              if (layer.explicit_costs) continue;
              const LayerWork lw = layer_work(m, layer, w);
              for (const PhaseWork* phase : {&lw.forward, &lw.backward_input, &lw.backward_weight, &lw.recompute}) {
                double bf16 = 0, fp8 = 0;
                for (const GemmShape& g : phase->gemms) {
                  CHECK(g.m > 0);
                  CHECK(g.k > 0);
                  CHECK(g.n > 0);
                  (g.fp8 ? fp8 : bf16) += g.flops();
                }
                INFO(name << " tp " << tp << (sp ? " sp " : " ") << to_string(r) << " " << to_string(p) << " "
                          << layer.name);
                // The routed experts' grouped GEMMs are in the FLOPs without a shape.
                const double routed = phase->routed_gemm_flops;
                CHECK(bf16 + fp8 + routed == Approx(phase->gemm_flops + phase->fp8_gemm_flops).epsilon(1e-12));
                if (lw.fp8) CHECK(bf16 == 0);
                else CHECK(fp8 == 0);
              }
            }
          }
  }
}

TEST_CASE("a column-parallel GEMM splits its output over tp, a row-parallel one its input") {
  const Model m = model_preset("gpt3-175b");
  const LayerWork w = layer_work(m, block(m), workload(8, false, Recompute::None, 1, 2048));
  // F: QKV (n = 3h / 8), output projection (k = h / 8), up (n = 4h / 8), down (k = 4h / 8), tokens whole.
  REQUIRE(w.forward.gemms.size() == 4);
  const auto shape = [](const GemmShape& g) { return std::vector<double>{g.m, g.k, g.n}; };
  CHECK(shape(w.forward.gemms[0]) == std::vector<double>{2048, h, 3.0 * h / 8});
  CHECK(shape(w.forward.gemms[1]) == std::vector<double>{2048, h / 8.0, h});
  CHECK(shape(w.forward.gemms[2]) == std::vector<double>{2048, h, 4.0 * h / 8});
  CHECK(shape(w.forward.gemms[3]) == std::vector<double>{2048, 4.0 * h / 8, h});
  // W: the weight gradients are (in x out) products over the tokens, the row-parallel ones split in m.
  bool row_split = false;
  for (const GemmShape& g : w.backward_weight.gemms) row_split = row_split || g.m == h / 8.0;
  CHECK(row_split);
}
