// check_against_cpu: the GPU layers and the CPU backend's on the same weights and micro-batch.
#include <map>

#include "core/error.hpp"
#include "executor/cuda/cuda_check.hpp"
#include "executor/cuda/cuda_layers.hpp"
#include "executor/cuda/host/cuda_api.hpp"

namespace pw {

NumericalCheck check_against_cpu(const Model& model, int stages, int micro_batch_size, int seq_len, DType dtype,
                                 std::uint64_t seed, Recompute recompute) {
  cuda::check_gpu_model(model);
  const GpuProbe probe = probe_gpus();
  if (!gpu_present(probe)) throw_runtime("{}", no_gpu_text(probe));
  if (stages < 1 || stages > model.num_layers())
    throw_bad_input("numerical check: {} stages for {} layers; use 1 to {}", stages, model.num_layers(), model.num_layers());
  std::vector<LayerRange> ranges;
  for (int s = 0; s < stages; ++s)
    ranges.push_back({s * model.num_layers() / stages, (s + 1) * model.num_layers() / stages - 1});

  NumericalCheck check;
  check.dtype = to_string(dtype);
  check.tolerance = check_tolerance(check.dtype);
  const auto compare = [&](const std::string& name, const std::vector<float>& gpu, const Mat& cpu) {
    const std::vector<float> ref(cpu.data(), cpu.data() + cpu.size());
    check.items.push_back({name, relative_error(gpu, ref, name), static_cast<long>(ref.size())});
  };

  const MicroBatch mb = synthetic_microbatch(seed, 0, 0, micro_batch_size, seq_len, model.transformer->vocab);
  CpuModel cpu(model, seed, recompute);

  PW_CUDA(cudaSetDevice(0));
  cuda::GpuContext g(0, dtype);
  std::vector<std::unique_ptr<cuda::GpuLayer>> layers;
  for (int i = 0; i < model.num_layers(); ++i) {
    const std::unique_ptr<CpuLayer> weights = make_cpu_layer(model, i, seed);
    layers.push_back(cuda::make_gpu_layer(g, model, i, *weights, recompute));
  }
  cuda::GpuBatch batch = cuda::upload_batch(g, mb);

  // Forward, stage by stage: each stage's output (the last one's is the loss).
  std::vector<StageContext> cpu_ctx(static_cast<size_t>(stages));
  std::vector<std::vector<cuda::GpuLayerContext>> gpu_ctx(static_cast<size_t>(stages));
  Mat x_cpu;
  cuda::Buf x_gpu;
  for (int s = 0; s < stages; ++s) {
    const LayerRange& r = ranges[static_cast<size_t>(s)];
    x_cpu = cpu.forward(r, x_cpu, mb, cpu_ctx[static_cast<size_t>(s)]);
    gpu_ctx[static_cast<size_t>(s)].assign(static_cast<size_t>(r.count()), cuda::GpuLayerContext{});
    for (int i = r.first; i <= r.last; ++i)
      x_gpu = layers[static_cast<size_t>(i)]->forward(x_gpu, batch, gpu_ctx[static_cast<size_t>(s)][static_cast<size_t>(i - r.first)]);
    compare(s == stages - 1 ? std::string("loss") : fmt::format("stage {} output", s), cuda::download_f32(g, x_gpu), x_cpu);
  }

  // Backward, stage by stage: B keeps the weight-gradient work and W applies it on the GPU (the split the
  // zero-bubble schedules run); the CPU applies it at once. Each boundary's input gradient, then every
  // parameter's gradient.
  Mat g_cpu;
  cuda::Buf g_gpu;
  for (int s = stages - 1; s >= 0; --s) {
    const LayerRange& r = ranges[static_cast<size_t>(s)];
    g_cpu = cpu.backward_input(r, g_cpu, cpu_ctx[static_cast<size_t>(s)], 1.0, false);
    auto& ctx = gpu_ctx[static_cast<size_t>(s)];
    for (int i = r.last; i >= r.first; --i) {
      cuda::GpuLayerContext& lc = ctx[static_cast<size_t>(i - r.first)];
      g_gpu = layers[static_cast<size_t>(i)]->backward_input(g_gpu, lc, 1.0,
                                                             [&](cuda::GpuWeightTerm&& t) { lc.pending.push_back(std::move(t)); });
    }
    for (cuda::GpuLayerContext& lc : ctx) {
      for (const cuda::GpuWeightTerm& t : lc.pending) cuda::apply(g, t);
      lc.pending.clear();
    }
    if (s > 0) compare(fmt::format("stage {} input gradient", s), cuda::download_f32(g, g_gpu), g_cpu);
  }
  std::map<std::string, Param*> cpu_params;
  for (Param* p : cpu.params()) cpu_params[p->name] = p;
  for (const auto& layer : layers)
    for (const cuda::GpuParam* p : layer->params()) {
      const auto it = cpu_params.find(p->name);
      if (it == cpu_params.end()) throw_runtime("numerical check: the CPU model has no parameter '{}'", p->name);
      compare("grad " + p->name, cuda::download_param(g, *p, true), it->second->grad);
    }
  return check;
}

}  // namespace pw
