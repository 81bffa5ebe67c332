#include <fmt/format.h>

#include "core/error.hpp"
#include "core/units.hpp"
#include "executor/cuda/cuda_check.hpp"
#include "executor/cuda/kernels.cuh"
#include "profiler/cuda/gpu_timing.hpp"
#include "profiler/repeat.hpp"

namespace pw::cuda {
namespace {

// A timing event pair's lifetime.
struct Events {
  std::vector<cudaEvent_t> e;
  explicit Events(int n) : e(static_cast<size_t>(n)) {
    for (cudaEvent_t& x : e) PW_CUDA(cudaEventCreate(&x));
  }
  ~Events() {
    for (cudaEvent_t x : e) cudaEventDestroy(x);
  }
  double seconds(int a, int b) const {
    float ms = 0;
    PW_CUDA(cudaEventElapsedTime(&ms, e[static_cast<size_t>(a)], e[static_cast<size_t>(b)]));
    return ms * 1e-3;
  }
};

Model one_block(const Model& model) {
  check_gpu_model(model);
  return one_block_per_kind(model);
}

Buf random_buf(GpuContext& g, long rows, long cols, std::uint64_t seed) {
  Buf b = make_buf(g, g.dtype, rows, cols);
  fill_normal(g.dtype, b.data(), b.elements(), seed, 1.0f, g.stream);
  return b;
}

}  // namespace

std::vector<LayerProfile> profile_gpu_layers(GpuContext& g, const Model& model, const CudaProfileRequest& request,
                                             std::string& report) {
  const Model small = one_block(model);
  const TransformerConfig& c = *small.transformer;
  const int seq = request.seq_len;
  if (seq < 1) throw_bad_input("--seq-len: must be at least 1, got {}", seq);
  if (c.learned_positions && seq > c.max_seq_len)
    throw_bad_input("--seq-len: {} exceeds the {} learned positions of '{}'; use --seq-len {} or less", seq, c.max_seq_len,
                    model.name, c.max_seq_len);
  std::vector<std::unique_ptr<GpuLayer>> layers;
  for (int i = 0; i < small.num_layers(); ++i) {
    const std::unique_ptr<CpuLayer> weights = make_cpu_layer(small, i, 1);
    layers.push_back(make_gpu_layer(g, small, i, *weights));
  }
  report += fmt::format("  F's high-water mark (device memory above what was in use before F, {}):\n", to_string(g.dtype));
  std::vector<LayerProfile> out;
  Events ev(4);
  for (int b : request.micro_batch_sizes) {
    if (b < 1) throw_bad_input("--micro-batch-size: must be at least 1, got {}", b);
    const GpuBatch batch = upload_batch(g, synthetic_microbatch(1, 0, 0, b, seq, c.vocab));
    const long n = static_cast<long>(b) * seq;
    const Buf x = random_buf(g, n, c.hidden, 2);
    const Buf dy = random_buf(g, n, c.hidden, 3);
    for (int i = 0; i < small.num_layers(); ++i) {
      const LayerKind kind = small.layers[static_cast<size_t>(i)].kind;
      GpuLayer& layer = *layers[static_cast<size_t>(i)];
      LayerProfile p;
      p.kind = profile_kind(c, small.layers[static_cast<size_t>(i)]);
      p.shape = layer_shape(c, small.layers[static_cast<size_t>(i)]);
      p.micro_batch_size = b;
      p.seq_len = seq;
      double high_water = 0;
      auto samples = repeat_phases(request.options, 3, [&] {
        GpuLayerContext ctx;
        g.synchronize();
        const std::size_t before = g.allocator.in_use();
        g.allocator.reset_peak();
        PW_CUDA(cudaEventRecord(ev.e[0], g.stream));
        const Buf y = layer.forward(x, batch, ctx);
        PW_CUDA(cudaEventRecord(ev.e[1], g.stream));
        g.synchronize();
        high_water = static_cast<double>(g.allocator.peak() - before);
        p.activation_bytes = ctx.bytes();
        p.output_bytes = kind == LayerKind::Head ? 0 : static_cast<double>(y.elements()) * dtype_bytes(y.dtype);
        layer.backward_input(dy, ctx, 1.0, [&](GpuWeightTerm&& t) { ctx.pending.push_back(std::move(t)); });
        PW_CUDA(cudaEventRecord(ev.e[2], g.stream));
        g.synchronize();
        p.weight_grad_bytes = ctx.bytes();
        for (const GpuWeightTerm& t : ctx.pending) apply(g, t);
        ctx.pending.clear();
        PW_CUDA(cudaEventRecord(ev.e[3], g.stream));
        g.synchronize();
        return std::vector<double>{ev.seconds(0, 1), ev.seconds(1, 2), ev.seconds(2, 3)};
      });
      p.forward = timing_of(samples[0]);
      p.backward_input = timing_of(samples[1]);
      p.backward_weight = timing_of(samples[2]);
      report += fmt::format("    {:<10} b {:>3}: {}\n", p.kind, b, format_bytes(high_water));
      out.push_back(p);
    }
  }
  return out;
}

double profile_gpu_optimizer(GpuContext& g, const Model& model, const CudaProfileRequest& request) {
  const Model small = one_block(model);
  const std::unique_ptr<CpuLayer> weights = make_cpu_layer(small, 1, 1);
  const std::unique_ptr<GpuLayer> block = make_gpu_layer(g, small, 1, *weights);
  const std::vector<GpuParam*> params = block->params();
  double count = 0;
  for (const GpuParam* p : params) count += static_cast<double>(p->count());
  const OptimizerConfig adam{OptimizerKind::Adam, 1e-6};
  Events ev(2);
  auto samples = repeat_phases(request.options, 1, [&] {
    PW_CUDA(cudaEventRecord(ev.e[0], g.stream));
    optimizer_step(g, adam, params);  // synchronises
    PW_CUDA(cudaEventRecord(ev.e[1], g.stream));
    g.synchronize();
    return std::vector<double>{ev.seconds(0, 1)};
  });
  return timing_of(samples[0]).median_s / count;
}

}  // namespace pw::cuda
