// What recomputation saves in measured activation memory, and that a tied matrix's gradient is the sum of its
// two uses (checked against finite differences of the loss).
#include <catch2/catch.hpp>

#include "executor/cpu_backend.hpp"
#include "executor/runtime.hpp"
#include "executor_test_util.hpp"
#include "schedules/generators.hpp"

using namespace pw;

namespace {

// The measured activation peak of each rank: gpipe over 2 ranks, 4 micro-batches of 2 sequences.
std::vector<double> gpipe_peaks(const Model& model, const std::vector<LayerRange>& ranges, Recompute recompute) {
  CpuBackendConfig config;
  config.micro_batch_size = 2;
  config.recompute = recompute;
  CpuBackend backend(model, ranges, config);
  RunOptions options;
  options.optimizer_step = false;
  options.timeout_s = 20;
  return run_schedule(make_schedule(ScheduleSpec{"gpipe", 2, 4}), backend, options).activation_peak_bytes;
}

}  // namespace

TEST_CASE("recomputation lowers the measured activation peak by what the blocks no longer keep") {
  // gpipe runs every F before any BW, so a rank's peak is m x the bytes F keeps for one micro-batch of its
  // stage (tensors alive only inside an action, such as what B recomputes, are not counted). A block keeps,
  // in float32 for n = b s tokens: the two norms' normalised inputs and outputs (4 n h) and their 1/rms
  // (2 n); Q, K, V and the attention output (2 n q + 2 n kv); the softmax (b a s^2); the MLP's input
  // projection (n 2f for SwiGLU) and its activation (n f). Selective recomputation drops the softmax:
  // m blocks 4 b a s^2 bytes less. Full recomputation keeps only the block input (n h): m blocks
  // 4 (everything - n h) bytes less. The embedding and the head keep what they kept.
  const Model model = test::tiny_llama(5);  // h 16, a 4, kv 2 x 4, f 24, s 8
  const TransformerConfig& c = *model.transformer;
  const double b = 2, s = c.max_seq_len, n = b * s, h = c.hidden, q = c.heads * c.head_dim,
               kv = c.kv_heads * c.head_dim, f = c.ffn, a = c.heads, m = 4;
  const double block_floats = 4 * n * h + 2 * n + 2 * n * q + 2 * n * kv + b * a * s * s + n * 2 * f + n * f;
  CHECK(block_floats == 3488);  // 1024 + 32 + 512 + 256 + 512 + 768 + 384
  const std::vector<LayerRange> ranges{{0, 3}, {4, 6}};  // embedding + 3 blocks | 2 blocks + head
  const std::vector<double> blocks{3, 2};
  const std::vector<double> none = gpipe_peaks(model, ranges, Recompute::None);
  const std::vector<double> selective = gpipe_peaks(model, ranges, Recompute::Selective);
  const std::vector<double> full = gpipe_peaks(model, ranges, Recompute::Full);
  for (size_t r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(none[r] - selective[r] == m * blocks[r] * 4 * b * a * s * s);
    CHECK(none[r] - full[r] == m * blocks[r] * 4 * (block_floats - n * h));
  }
  CHECK(none[0] - full[0] == 4 * 3 * 4 * (3488 - 256));  // 155,136 bytes
}

TEST_CASE("the gradient of a tied matrix is the sum of the embedding's and the head's, as the loss changes") {
  TransformerConfig c = *test::tiny_llama(2).transformer;
  c.tied_embeddings = true;
  const Model model = make_transformer_model("tied", c);
  CpuModel cpu(model, 3);
  const std::vector<MicroBatch> data = test::batches(model, 2);
  test::reference_iteration(cpu, data);
  Param& table = *cpu.tied_table();
  Param& head = *cpu.tied_head();
  const Mat embedding_part = table.grad, head_part = head.grad.transpose();
  cpu.sum_tied_gradients();
  CHECK(table.grad == embedding_part + head_part);
  CHECK(head.grad == table.grad.transpose());

  // The element where the summed gradient is largest, among tokens the batches use.
  Eigen::Index row = 0, col = 0;
  table.grad.cwiseAbs().maxCoeff(&row, &col);
  auto loss_with = [&](float delta) {
    table.value(row, col) += delta;
    head.value(col, row) += delta;
    const double loss = test::reference_loss(cpu, data);
    table.value(row, col) -= delta;
    head.value(col, row) -= delta;
    return loss;
  };
  const float eps = 1e-2f;
  const double numeric = (loss_with(eps) - loss_with(-eps)) / (2.0 * eps);
  const double sum = table.grad(row, col);
  INFO("numeric " << numeric << ", sum " << sum << ", embedding " << embedding_part(row, col) << ", head "
                  << head_part(row, col));
  CHECK(numeric == Approx(sum).epsilon(0.02));
  // Either use alone is off by the other's share.
  CHECK(std::abs(numeric - sum) < std::abs(numeric - embedding_part(row, col)));
  CHECK(std::abs(numeric - sum) < std::abs(numeric - head_part(row, col)));
}
