#pragma once
// The layers of executor/cpu_layers.hpp on a GPU: embedding, block, head, each with F, B (backward-input)
// and W (backward-weight) as separate launches. GEMMs on cuBLASLt (fp32 accumulate), the rest our kernels
// (executor/cuda/kernels.cuh). Weights start as the CPU layer's (uploaded from it), kept in fp32 with a
// bf16 copy for the GEMMs in bf16 mode; weight gradients and the optimizer state are fp32.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "core/model.hpp"
#include "executor/cpu_layers.hpp"
#include "executor/cpu_model.hpp"
#include "executor/cuda/device_memory.hpp"
#include "executor/cuda/gemm.hpp"

namespace pw::cuda {

// What one rank's GPU work runs with. All of it lives on the rank's thread.
struct GpuContext {
  GpuContext(int device, DType dtype);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int device;
  DType dtype;
  cudaStream_t stream = nullptr;
  DeviceAllocator allocator;
  std::unique_ptr<Gemm> gemm;
  // Rotary cos and sin tables (seq x head_dim / 2), by (seq, head_dim), made once.
  std::pair<const float*, const float*> rotary(int seq, int head_dim);
  void synchronize();

 private:
  std::map<std::pair<int, int>, std::pair<BlockPtr, BlockPtr>> rotary_;
};

// A device matrix inside a layer: its block, type and shape.
struct Buf {
  BlockPtr block;
  DType dtype = DType::F32;
  long rows = 0, cols = 0;
  void* data() const { return block ? block->data() : nullptr; }
  long elements() const { return rows * cols; }
  explicit operator bool() const { return static_cast<bool>(block); }
};
Buf make_buf(GpuContext& g, DType dtype, long rows, long cols);
std::vector<float> download_f32(GpuContext& g, const Buf& b);  // synchronises

struct GpuParam {
  std::string name;
  long rows = 0, cols = 0;
  BlockPtr master, grad, compute, adam_m, adam_v;  // compute: the GEMM copy (the master itself in fp32 mode)
  int steps = 0;
  long count() const { return rows * cols; }
};

// One micro-batch's token ids and targets on the device.
struct GpuBatch {
  int batch = 0, seq = 0;
  BlockPtr tokens, targets;  // int32, batch x seq
};
GpuBatch upload_batch(GpuContext& g, const MicroBatch& mb);

// The weight-gradient work one parameterised op leaves from B for W (WeightGradTerm's GPU form).
struct GpuWeightTerm {
  WeightGradTerm::Kind kind = WeightGradTerm::Kind::Linear;
  Buf input;  // Linear: the op's input; Norm: x-hat
  Buf grad;   // the output's gradient
  BlockPtr tokens;
  int seq = 0;
  GpuParam* weight = nullptr;
  GpuParam* bias = nullptr;
};
void apply(GpuContext& g, const GpuWeightTerm& term);

struct GpuLayerContext {
  std::vector<Buf> saved;
  BlockPtr tokens;
  std::vector<GpuWeightTerm> pending;
  double bytes() const;  // the rounded device bytes held, each block once
};
using GpuSink = std::function<void(GpuWeightTerm&&)>;

class GpuLayer {
 public:
  virtual ~GpuLayer() = default;
  // The head returns the micro-batch's mean loss as a 1 x 1 fp32 buffer.
  virtual Buf forward(const Buf& x, const GpuBatch& batch, GpuLayerContext& ctx) = 0;
  // An empty Buf from the embedding.
  virtual Buf backward_input(const Buf& dy, GpuLayerContext& ctx, double loss_scale, const GpuSink& sink) = 0;
  virtual std::vector<GpuParam*> params() = 0;
};

// The layer for model.layers[index], its weights copied from `cpu` (make_cpu_layer of the same layer).
// `recompute` applies to blocks, as make_cpu_layer's: Full keeps only the block's input at F and reruns the
// block's forward at the start of B; Selective keeps all but the attention probabilities, which B rebuilds
// from Q and K.
std::unique_ptr<GpuLayer> make_gpu_layer(GpuContext& g, const Model& model, int index, CpuLayer& cpu,
                                         Recompute recompute = Recompute::None);

// Weights and gradients back on the host as fp32 (for the numerical check).
std::vector<float> download_param(GpuContext& g, const GpuParam& p, bool gradient);

// One optimizer step over `params` (then their GEMM copies refreshed and gradients zeroed).
void optimizer_step(GpuContext& g, const OptimizerConfig& config, const std::vector<GpuParam*>& params);

// The model shapes the CUDA backend runs; BadInput naming the field and the fix otherwise.
void check_gpu_model(const Model& model);

}  // namespace pw::cuda
