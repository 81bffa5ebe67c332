// The CPU kernels: gradients against finite differences, B then W against the fused BW, optimizers,
// synthetic data.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include "executor/cpu_model.hpp"
#include "executor_test_util.hpp"

using namespace pw;

namespace {

// For every parameter tensor: the directional derivative of the mean loss along a random direction d,
// by central differences, against <grad, d>. Untrained residual streams are small (weights of std 0.02),
// so the norms curve sharply and a plain central difference at a step the float loss can resolve is
// off by O(eps^2) terms of several percent; Richardson extrapolation of steps eps and eps / 2 cancels them.
// `prepare` may change the initial weights first; `checked` picks the parameters checked (all by default).
void check_gradients(const Model& model, const std::function<void(CpuModel&)>& prepare = {},
                     const std::function<bool(const Param&)>& checked = {}) {
  CpuModel m(model, 11);
  if (prepare) prepare(m);
  const std::vector<MicroBatch> data = test::batches(model, 2);
  test::reference_iteration(m, data);
  Rng rng(3);
  for (Param* p : m.params()) {
    if (checked && !checked(*p)) continue;
    Mat d(p->value.rows(), p->value.cols());
    for (Eigen::Index i = 0; i < d.size(); ++i) d.data()[i] = static_cast<float>(rng.normal());
    const double analytic = static_cast<double>(p->grad.cwiseProduct(d).sum());
    const Mat saved = p->value;
    auto central = [&](float eps) {
      p->value = saved + eps * d;
      const double up = test::reference_loss(m, data);
      p->value = saved - eps * d;
      const double down = test::reference_loss(m, data);
      p->value = saved;
      return (up - down) / (2.0 * eps);
    };
    const double numeric = (4 * central(1e-3f) - central(2e-3f)) / 3;
    INFO(model.name << " " << p->name << ": analytic " << analytic << ", numeric " << numeric);
    CHECK(std::abs(analytic - numeric) <= 1e-2 * std::abs(numeric) + 2e-4);
  }
}

std::vector<Mat> grads_of(CpuModel& m) {
  std::vector<Mat> out;
  for (Param* p : m.params()) out.push_back(p->grad);
  return out;
}

}  // namespace

TEST_CASE("parameter gradients agree with finite differences (Llama-style block: RMSNorm, SwiGLU, GQA, rotary)") {
  check_gradients(test::tiny_llama(2));
}

TEST_CASE("parameter gradients agree with finite differences (GPT-style block: LayerNorm, GELU, biases, positions)") {
  check_gradients(test::tiny_gpt(2));
}

TEST_CASE("the loss of an untrained model is close to ln(vocab)") {
  // Weights of standard deviation 0.02 give near-uniform logits: cross-entropy ln 32 = 3.4657.
  CpuModel m(test::tiny_llama(), 5);
  CHECK(test::reference_loss(m, test::batches(m.model(), 3)) == Approx(std::log(32.0)).margin(0.02));
}

TEST_CASE("B now and W later give the gradients of the fused BW, whatever the order of the Ws") {
  for (const Model& model : {test::tiny_llama(), test::tiny_gpt()}) {
    const std::vector<MicroBatch> data = test::batches(model, 3);
    CpuModel fused(model, 2);
    const double fused_loss = test::reference_iteration(fused, data);

    // Split at layer 2: stage A holds the embedding and block 0, stage B the rest.
    CpuModel split(model, 2);
    const LayerRange a{0, 1}, b{2, split.num_layers() - 1};
    std::vector<StageContext> ctx_a(3), ctx_b(3);
    double loss = 0;
    for (int i = 0; i < 3; ++i) loss += split.forward(b, split.forward(a, Mat(), data[i], ctx_a[i]), data[i], ctx_b[i])(0, 0);
    for (int i : {2, 0, 1}) {
      const Mat g = split.backward_input(b, Mat(), ctx_b[i], 1.0 / 3, true);
      CHECK(split.backward_input(a, g, ctx_a[i], 1.0 / 3, true).size() == 0);
    }
    for (int i : {1, 2, 0}) split.backward_weight(ctx_b[i]);
    for (int i : {0, 2, 1}) split.backward_weight(ctx_a[i]);
    CHECK(loss / 3 == Approx(fused_loss).epsilon(1e-6));
    const std::vector<Mat> want = grads_of(fused), got = grads_of(split);
    REQUIRE(want.size() == got.size());
    for (size_t k = 0; k < want.size(); ++k) {
      INFO(split.params()[k]->name);
      CHECK((want[k] - got[k]).norm() <= 1e-5 * want[k].norm() + 1e-9);
    }
  }
}

TEST_CASE("F keeps what B needs, B keeps what W needs, W frees everything") {
  // GPT style, one block, n = 2 x 8 tokens, h = 16, f = 64, a = 4 heads, s = 8, V = 32; 4 bytes per value.
  CpuModel m(test::tiny_gpt(1), 1);
  const MicroBatch mb = test::batches(m.model(), 1)[0];
  const double n = 16, h = 16, f = 64, a = 4, s = 8, V = 32;
  StageContext ctx;
  m.forward(test::whole(m), Mat(), mb, ctx);
  // Per token: embedding token id 1; block x-hat, normed input, q, k, v, attention output, x-hat and normed
  // input of the MLP (8 h), two 1/std, MLP input and activation (2 f), softmax rows (a s); head x-hat and
  // normed input (2 h), 1/std, softmax over the vocabulary (V) and the target id.
  CHECK(ctx.bytes() == 4 * n * (1 + 8 * h + 2 + 2 * f + a * s + 2 * h + 1 + V + 1));
  m.backward_input(test::whole(m), Mat(), ctx, 1.0, /*defer_weights=*/true);
  // What W needs, per token: embedding gradient and token id (h + 1); block input and output gradient of
  // down (f + h), up (h + f), norm2 (2 h), out (2 h), qkv (h + 3 h), norm1 (2 h); head lm (h + V), norm (2 h).
  CHECK(ctx.bytes() == 4 * n * ((h + 1) + (2 * f + 12 * h) + (3 * h + V)));
  m.backward_weight(ctx);
  CHECK(ctx.bytes() == 0);
}

TEST_CASE("SGD and Adam steps follow their update rules") {
  Param p;
  p.value = Mat::Constant(1, 3, 1.0f);
  p.grad.resize(1, 3);
  p.grad << 0.5f, -2.0f, 0.0f;
  Param q = p;
  OptimizerConfig sgd{OptimizerKind::Sgd, 0.1};
  optimizer_step(sgd, {&p});
  // w - lr g.
  CHECK(p.value(0, 0) == Approx(0.95f));
  CHECK(p.value(0, 1) == Approx(1.2f));
  CHECK(p.value(0, 2) == 1.0f);
  CHECK(p.grad.isZero());
  // Adam's first step: m-hat = g, v-hat = g^2, so w - lr g / (|g| + eps).
  OptimizerConfig adam{OptimizerKind::Adam, 0.01};
  optimizer_step(adam, {&q});
  CHECK(q.value(0, 0) == Approx(1.0f - 0.01f));
  CHECK(q.value(0, 1) == Approx(1.0f + 0.01f));
  CHECK(q.value(0, 2) == 1.0f);
  CHECK(q.steps == 1);
}

TEST_CASE("synthetic micro-batches are deterministic and follow t -> 5t + 3 mod vocab") {
  const MicroBatch a = synthetic_microbatch(9, 2, 1, 3, 8, 32);
  const MicroBatch b = synthetic_microbatch(9, 2, 1, 3, 8, 32);
  const MicroBatch c = synthetic_microbatch(9, 2, 2, 3, 8, 32);
  CHECK(a.tokens == b.tokens);
  CHECK(a.tokens != c.tokens);
  REQUIRE(a.tokens.size() == 24);
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    CHECK(a.targets[i] == (5 * a.tokens[i] + 3) % 32);
    if (i % 8 != 7) CHECK(a.tokens[i + 1] == a.targets[i]);
  }
}

TEST_CASE("Adam training lowers the loss") {
  CpuModel m(test::tiny_llama(2), 4);
  OptimizerConfig adam{OptimizerKind::Adam, 1e-2};
  double first = 0, last = 0;
  for (int it = 0; it < 30; ++it) {
    const double loss = test::reference_iteration(m, test::batches(m.model(), 2, it));
    optimizer_step(adam, m.params());
    (it == 0 ? first : last) = loss;
  }
  CHECK(last < 0.5 * first);
}

// Every expert picked (top k = E): the loss is smooth, so every parameter is checked, the router's softmax
// and the shared expert's gate included.
Model all_experts_picked(bool gpt) { return test::tiny_moe(3, gpt, 4); }

TEST_CASE("MoE blocks, every expert picked: parameter gradients agree with finite differences") {
  check_gradients(all_experts_picked(false));
  check_gradients(all_experts_picked(true));
}

// Top 2 of 4: the loss jumps where a token's choice changes, which a step upstream of a router can cause.
// With the last block's router at 100 times its initial scale, its tokens' logits lie too far apart for
// the steps on that block's MLP (router, experts, shared expert and gate) and the head to change a choice.
TEST_CASE("MoE blocks, top 2 of 4 experts: the last block's MLP gradients agree with finite differences") {
  for (bool gpt : {false, true}) {
    const auto spread = [](CpuModel& m) {
      for (Param* p : m.params())
        if (p->name == "block2.router.w") p->value *= 100.0f;
    };
    const auto downstream = [](const Param& p) {
      return p.name.rfind("head", 0) == 0 || p.name.rfind("block2.router", 0) == 0 ||
             p.name.rfind("block2.expert", 0) == 0 || p.name.rfind("block2.shared", 0) == 0;
    };
    check_gradients(test::tiny_moe(3, gpt), spread, downstream);
  }
}

TEST_CASE("MoE blocks: a shard holds its own experts, named by their index in the whole model") {
  const Model model = test::tiny_moe(3);
  const auto names = [&](const ExpertShard& shard) {
    CpuModel m(model, 11, std::vector<Recompute>(static_cast<size_t>(model.num_layers()), Recompute::None), shard);
    std::vector<std::string> out;
    for (Param* p : m.params())
      if (p->expert && p->name.rfind("block2.", 0) == 0) out.push_back(p->name);
    return out;
  };
  CHECK(names({}) == std::vector<std::string>{"block2.expert0.up.w", "block2.expert0.down.w", "block2.expert1.up.w",
                                              "block2.expert1.down.w", "block2.expert2.up.w", "block2.expert2.down.w",
                                              "block2.expert3.up.w", "block2.expert3.down.w"});
  CHECK(names({2, 1, {4, 5}}) == std::vector<std::string>{"block2.expert2.up.w", "block2.expert2.down.w",
                                                         "block2.expert3.up.w", "block2.expert3.down.w"});
  // Block 0 is dense (first_dense 1): no experts, its MLP is the dense one.
  CpuModel whole_model(model, 11);
  for (Param* p : whole_model.params()) {
    INFO(p->name);
    CHECK(p->expert == (p->name.find(".expert") != std::string::npos));
    CHECK(p->name.rfind("block0.expert", 0) != 0);
  }
}
