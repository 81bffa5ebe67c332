#pragma once
// What the CLI and the tests call of the CUDA backend. Declared in every build; in a build without CUDA the
// entry points throw BadInput with cuda_not_built_text() and probe_gpus() says why there is no GPU, so that
// callers need no #ifdef.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/model.hpp"
#include "core/stage_costs.hpp"
#include "executor/backend.hpp"
#include "executor/cpu_model.hpp"
#include "executor/cuda/host/dtype.hpp"
#include "executor/cuda/host/gpu_error.hpp"
#include "executor/cuda/host/numerical_check.hpp"
#include "executor/cuda/host/process_part.hpp"
#include "executor/transport.hpp"

namespace pw {

// Whether this build has the CUDA backend.
bool cuda_built();
// What cudaGetDeviceCount says here (in a build without CUDA: failed, with cuda_not_built_text()).
GpuProbe probe_gpus();

struct CudaBackendConfig {
  int micro_batch_size = 1;
  int seq_len = 0;  // 0: the model's
  std::uint64_t seed = 1;
  OptimizerConfig optimizer;
  DType dtype = DType::BF16;
  std::string transport = "auto";  // auto, nccl or local (gpu_placement.hpp)
  double timeout_s = 60;           // longest wait for the NCCL communicators to form (and the NCCL id to arrive)
  Recompute recompute = Recompute::None;   // of the blocks: none, selective or full, as the CPU backend's
  std::vector<Recompute> stage_recompute;  // one level per stage instead; empty: `recompute`
  // This process's ranks, GPUs and transport (plan_cuda_process); unset: every rank of the schedule here.
  std::optional<CudaProcessPart> part;
  // Process 0's bytes to every process: how the NCCL id travels over the process group (distribute_nccl_id).
  BroadcastBytes broadcast;
};

// Ranks as threads of this process, each on a GPU: every rank of the schedule (rank r on GPU r mod the GPU
// count), or this process's share of them when a launcher started several (config.part). Weights start as the
// CPU backend's for the same seed (a run on either backend trains the same model). Every compute action
// ends with the rank's stream synchronised, so the runtime's clock times the GPU work and a tensor handed to
// the runtime is complete. One backend runs one schedule.
class CudaBackend : public Backend {
 public:
  // What moves tensors between this backend's ranks; pass it to run_schedule.
  virtual Transport& transport() = 0;
  // The mean loss over the micro-batches of each iteration run so far.
  virtual std::vector<double> losses() const = 0;
  // "4 ranks on 1 GPU, local transport (device-to-device copies) (NVIDIA H200)"
  virtual std::string placement_text() const = 0;
  // The ranks this process runs (all of the schedule's unless config.part says otherwise), ascending.
  virtual std::vector<int> local_ranks() const = 0;
};

// `lowered` is the schedule that will run (the NCCL transport derives its channels from it). BadInput for a
// model or configuration the backend cannot run; Runtime error with no_gpu_text() without a GPU.
std::unique_ptr<CudaBackend> make_cuda_backend(const Model& model, std::vector<LayerRange> stage_layers,
                                               const Schedule& lowered, const CudaBackendConfig& config);

// The GPU layers against the CPU backend's on one micro-batch of `model` split into `stages` stages: each
// stage's output, the loss, each boundary's input gradient and every parameter's gradient. `recompute`: the
// blocks' level on both sides (B then reruns what F dropped).
NumericalCheck check_against_cpu(const Model& model, int stages, int micro_batch_size, int seq_len, DType dtype,
                                 std::uint64_t seed, Recompute recompute = Recompute::None);

}  // namespace pw
