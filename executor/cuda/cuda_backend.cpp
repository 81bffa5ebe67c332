// The CUDA backend: RankCompute on GPU layers, the local or NCCL transport between the ranks.
#include <algorithm>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "executor/stage_layout.hpp"
#include "executor/cuda/cuda_check.hpp"
#include "executor/cuda/cuda_layers.hpp"
#include "executor/cuda/host/cuda_api.hpp"
#include "executor/cuda/host/gpu_placement.hpp"
#include "executor/cuda/host/recompute_levels.hpp"
#include "executor/cuda/kernels.cuh"
#include "executor/cuda/local_transport.hpp"
#include "executor/cuda/nccl_transport.hpp"
#include "executor/pair_meeting.hpp"

namespace pw {

bool cuda_built() { return true; }

GpuProbe probe_gpus() {
  GpuProbe p;
  const cudaError_t e = cudaGetDeviceCount(&p.count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    p.failed = true;
    p.error = cudaGetErrorString(e);
    p.count = 0;
  }
  return p;
}

namespace cuda {
namespace {

// What a rank keeps on its GPU. The backend owns it, not the RankCompute: tensors still held by the runtime
// or a transport when the ranks end must find their allocator alive.
struct RankGpu {
  std::unique_ptr<GpuContext> gpu;
  std::map<int, std::unique_ptr<GpuLayer>> layers;  // by layer index
};

class CudaBackendImpl;

// Where the two ranks of this process holding the copies of a tied matrix swap their gradients: each posts
// its gradient, copies the other's into its own memory (device to device, across GPUs too) and waits until
// the other has copied its, so that neither changes its gradient while the other still reads it.
class TiedMeeting {
 public:
  void exchange(int rank, int other, const void* mine, int device, void* into, std::size_t bytes,
                const std::atomic<bool>* stop, Clock::time_point deadline) {
    {
      std::lock_guard lock(mutex_);
      posted_[rank] = {mine, device};
    }
    meet(stop, deadline);
    std::pair<const void*, int> theirs;
    {
      std::lock_guard lock(mutex_);
      theirs = posted_.at(other);
    }
    PW_CUDA(cudaMemcpyPeer(into, device, theirs.first, theirs.second, bytes));
    meet(stop, deadline);
  }

 private:
  void meet(const std::atomic<bool>* stop, Clock::time_point deadline) {
    pair_.meet(stop, deadline, "tied embeddings: the rank holding the other copy did not come to sum the gradients in time");
  }

  PairMeeting pair_;
  std::mutex mutex_;  // posted_
  std::map<int, std::pair<const void*, int>> posted_;
};

struct StageCtx {
  std::vector<GpuLayerContext> layers;
  double bytes() const {
    double total = 0;
    for (const GpuLayerContext& l : layers) total += l.bytes();
    return total;
  }
};

class CudaBackendImpl final : public CudaBackend {
 public:
  CudaBackendImpl(const Model& model, std::vector<LayerRange> stage_layers, const Schedule& schedule,
                  const CudaBackendConfig& config);
  ~CudaBackendImpl() override {
    // Transports hold tensors of the ranks' allocators: they go first.
    local_.reset();
    nccl_.reset();
    ranks_.clear();
  }

  std::string name() const override { return "cuda"; }
  std::unique_ptr<RankCompute> make_rank(const RankSetup& setup) override;
  Transport& transport() override {
    if (local_) return *local_;
    return *nccl_;
  }
  std::vector<double> losses() const override { return losses_.values(); }
  std::string placement_text() const override {
    if (part_.processes == 1)
      return fmt::format("{} ({})", pw::placement_text(GpuPlacement{part_.bootstrap.devices, part_.local_transport}, devices_),
                         device_name_);
    return fmt::format("process {} of {}: {}, NCCL ({})", part_.process, part_.processes, to_text(part_.bootstrap),
                       device_name_);
  }
  std::vector<int> local_ranks() const override { return part_.ranks(); }

 private:
  friend class CudaRank;
  Model model_;
  std::vector<LayerRange> stage_layers_;
  CudaBackendConfig config_;
  int devices_ = 0;
  std::string device_name_;
  CudaProcessPart part_;
  std::vector<Recompute> levels_;  // per layer
  std::vector<int> stage_rank_;     // the rank of each stage
  TiedMeeting tied_;
  UniqueIdBytes id_{};
  std::unique_ptr<LocalTransport> local_;
  std::unique_ptr<NcclTransport> nccl_;
  std::mutex mutex_;  // ranks_
  std::vector<std::unique_ptr<RankGpu>> ranks_;
  LossLog losses_;
};

class CudaRank final : public LossRank {
 public:
  CudaRank(CudaBackendImpl& backend, const RankSetup& setup, RankGpu& gpu)
      : LossRank(backend.losses_), b_(backend), setup_(setup), r_(gpu) {}

  TensorPtr forward(int stage, int mb, TensorPtr input) override {
    GpuContext& g = *r_.gpu;
    const LayerRange& range = b_.stage_layers_[static_cast<size_t>(stage)];
    StageCtx& ctx = contexts_[{stage, mb}];
    ctx.layers.assign(static_cast<size_t>(range.count()), GpuLayerContext{});
    Buf x = as_buf(input);
    const int last = b_.model_.num_layers() - 1;
    // Every stage's blocks need the micro-batch's shape (attention splits rows into sequences); only the
    // stages with the embedding or the head need its tokens. A stage of blocks alone once ran its attention
    // on 0 sequences, reading memory nothing wrote (seen on the first GPU run; compute-sanitizer's initcheck).
    GpuBatch batch{b_.config_.micro_batch_size, b_.config_.seq_len, nullptr, nullptr};
    if (range.first == 0 || range.last == last) {
      const TransformerConfig& c = *b_.model_.transformer;
      batch = upload_batch(g, synthetic_microbatch(b_.config_.seed, iteration(), mb, b_.config_.micro_batch_size,
                                                   b_.config_.seq_len, c.vocab));
    }
    for (int i = range.first; i <= range.last; ++i)
      x = r_.layers.at(i)->forward(x, batch, ctx.layers[static_cast<size_t>(i - range.first)]);
    g.synchronize();
    setup_.memory->add(ctx.bytes());
    if (range.last == last) {
      add_loss(download_f32(g, x).at(0));
      return nullptr;
    }
    return std::make_shared<DeviceTensor>(x.block, x.dtype, x.rows, x.cols);
  }

  TensorPtr backward_input(int stage, int mb, TensorPtr grad_output) override {
    return backward_pass(stage, mb, std::move(grad_output), true);
  }

  void backward_weight(int stage, int mb) override {
    auto it = contexts_.find({stage, mb});
    if (it == contexts_.end()) throw_runtime("W of stage {} micro-batch {} before its B", stage, mb);
    const double before = it->second.bytes();
    for (GpuLayerContext& lc : it->second.layers) {
      for (const GpuWeightTerm& t : lc.pending) apply(*r_.gpu, t);
      lc.pending.clear();
    }
    contexts_.erase(it);
    r_.gpu->synchronize();
    setup_.memory->add(-before);
  }

  TensorPtr backward(int stage, int mb, TensorPtr grad_output) override {
    TensorPtr g = backward_pass(stage, mb, std::move(grad_output), false);
    contexts_.erase({stage, mb});
    return g;
  }

  void optimizer_step() override {
    sum_tied_gradients();
    std::vector<GpuParam*> params;
    for (int s : setup_.stages) {
      const LayerRange& range = b_.stage_layers_[static_cast<size_t>(s)];
      for (int i = range.first; i <= range.last; ++i)
        for (GpuParam* p : r_.layers.at(i)->params()) params.push_back(p);
    }
    cuda::optimizer_step(*r_.gpu, b_.config_.optimizer, params);
  }

 private:
  // Tied embeddings: the embedding's table (vocab x hidden) and the head's weight (hidden x vocab) each get
  // the sum of both gradients, as on the CPU backend; every copy then steps alike and stays equal.
  void sum_tied_gradients() {
    if (!b_.model_.transformer->tied_embeddings) return;
    const int last_stage = static_cast<int>(b_.stage_layers_.size()) - 1;
    const auto holds = [&](int stage) { return std::find(setup_.stages.begin(), setup_.stages.end(), stage) != setup_.stages.end(); };
    const bool embedding = holds(0), head = holds(last_stage);
    if (!embedding && !head) return;
    GpuContext& g = *r_.gpu;
    GpuParam* table = embedding ? r_.layers.at(0)->params().front() : nullptr;
    GpuParam* lm = head ? r_.layers.at(b_.model_.num_layers() - 1)->params().back() : nullptr;
    if (table && lm) {
      sum_transposed_pair(static_cast<float*>(table->grad->data()), static_cast<float*>(lm->grad->data()), table->rows,
                          table->cols, g.stream);
      g.synchronize();
      return;
    }
    GpuParam& mine = table ? *table : *lm;
    const int other = b_.stage_rank_.at(static_cast<size_t>(table ? last_stage : 0));
    const std::size_t bytes = static_cast<std::size_t>(mine.count()) * sizeof(float);
    const BlockPtr theirs = allocate_block(g.allocator, bytes);
    g.synchronize();  // the block may be one that kernels still queued on the stream used
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(b_.config_.timeout_s));
    if (b_.part_.holds(other))
      b_.tied_.exchange(setup_.rank, other, mine.grad->data(), g.device, theirs->data(), bytes, setup_.stop, deadline);
    else
      b_.nccl_->exchange_tied(setup_.rank, mine.grad->data(), theirs->data(), bytes, deadline);
    add_transposed(static_cast<float*>(mine.grad->data()), static_cast<const float*>(theirs->data()), mine.rows, mine.cols,
                   g.stream);
    g.synchronize();
  }

  static Buf as_buf(const TensorPtr& t) {
    if (!t) return Buf{};
    const auto& d = static_cast<const DeviceTensor&>(*t);
    return Buf{d.block(), d.dtype(), d.rows(), d.cols()};
  }

  TensorPtr backward_pass(int stage, int mb, TensorPtr grad_output, bool defer) {
    auto it = contexts_.find({stage, mb});
    if (it == contexts_.end()) throw_runtime("B of stage {} micro-batch {} before its F", stage, mb);
    StageCtx& ctx = it->second;
    const double before = ctx.bytes();
    const LayerRange& range = b_.stage_layers_[static_cast<size_t>(stage)];
    Buf g = as_buf(grad_output);
    GpuContext& gpu = *r_.gpu;
    for (int i = range.last; i >= range.first; --i) {
      GpuLayerContext& lc = ctx.layers[static_cast<size_t>(i - range.first)];
      const GpuSink sink = [&](GpuWeightTerm&& t) {
        if (defer)
          lc.pending.push_back(std::move(t));
        else
          apply(gpu, t);
      };
      g = r_.layers.at(i)->backward_input(g, lc, 1.0 / microbatches(), sink);
    }
    gpu.synchronize();
    setup_.memory->add(ctx.bytes() - before);
    if (!g) return nullptr;
    return std::make_shared<DeviceTensor>(g.block, g.dtype, g.rows, g.cols);
  }

  CudaBackendImpl& b_;
  RankSetup setup_;
  RankGpu& r_;
  std::map<std::pair<int, int>, StageCtx> contexts_;
};

CudaBackendImpl::CudaBackendImpl(const Model& model, std::vector<LayerRange> stage_layers, const Schedule& schedule,
                                 const CudaBackendConfig& config)
    : model_(model), stage_layers_(std::move(stage_layers)), config_(config) {
  check_gpu_model(model);
  config_.seq_len = checked_seq_len(model, config_.micro_batch_size, config_.seq_len);
  check_stage_layers(model, stage_layers_);
  const GpuProbe probe = probe_gpus();
  if (!gpu_present(probe)) throw_runtime("{}", no_gpu_text(probe));
  devices_ = probe.count;
  cudaDeviceProp prop{};
  PW_CUDA(cudaGetDeviceProperties(&prop, 0));
  device_name_ = prop.name;
  levels_ = layer_recompute_levels(model.num_layers(), stage_layers_, config_.recompute, config_.stage_recompute);
  const Schedule lowered = schedule.lowered ? schedule : lower(schedule);
  part_ = config_.part ? *config_.part : plan_cuda_process(LaunchEnv{}, lowered.num_ranks(), devices_, config_.transport, "");
  if (part_.bootstrap.world_ranks != lowered.num_ranks())
    throw_runtime("cuda backend: the process plan has {} ranks, the schedule {}", part_.bootstrap.world_ranks,
                  lowered.num_ranks());
  for (int d : part_.bootstrap.devices)
    if (d < 0 || d >= devices_) throw_runtime("cuda backend: GPU {} of {}, {} visible here", d, to_text(part_.bootstrap), devices_);
  for (int st = 0; st < lowered.num_stages(); ++st) stage_rank_.push_back(lowered.placement.rank_of(st));
  ranks_.resize(static_cast<size_t>(lowered.num_ranks()));
  const long rows = static_cast<long>(config_.micro_batch_size) * config_.seq_len;
  if (part_.local_transport) {
    local_ = std::make_unique<LocalTransport>(lowered.num_ranks());
  } else {
    // Ranks of other processes can only swap the tied gradients over NCCL: their pair gets a communicator.
    const int first = stage_rank_.front(), last = stage_rank_.back();
    const bool tied_across = model.transformer->tied_embeddings && first != last &&
                             (!part_.holds(first) || !part_.holds(last));
    nccl_ = std::make_unique<NcclTransport>(lowered, config_.dtype, rows, model.transformer->hidden,
                                            tied_across ? std::pair{first, last} : std::pair{-1, -1});
    // Collective across the processes: each constructs its backend at the same point of the run.
    id_ = distribute_nccl_id(part_, nccl_unique_id, config_.broadcast,
                             Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(config_.timeout_s)));
  }
}

std::unique_ptr<RankCompute> CudaBackendImpl::make_rank(const RankSetup& setup) {
  if (setup.num_stages != static_cast<int>(stage_layers_.size()))
    throw_bad_input("layer ranges: {} given for a schedule of {} stages; give one per stage", stage_layers_.size(),
                    setup.num_stages);
  {
    std::lock_guard lock(mutex_);
    if (ranks_.at(static_cast<size_t>(setup.rank))) throw_runtime("cuda backend: one backend runs one schedule");
  }
  const int device = part_.device_of(setup.rank);
  PW_CUDA(cudaSetDevice(device));
  auto rank = std::make_unique<RankGpu>();
  rank->gpu = std::make_unique<GpuContext>(device, config_.dtype);
  for (int s : setup.stages) {
    const LayerRange& range = stage_layers_[static_cast<size_t>(s)];
    for (int i = range.first; i <= range.last; ++i) {
      const std::unique_ptr<CpuLayer> weights = make_cpu_layer(model_, i, config_.seed);
      rank->layers[i] = make_gpu_layer(*rank->gpu, model_, i, *weights, levels_[static_cast<size_t>(i)]);
    }
  }
  rank->gpu->synchronize();
  RankGpu& ref = *rank;
  {
    std::lock_guard lock(mutex_);
    ranks_[static_cast<size_t>(setup.rank)] = std::move(rank);
  }
  if (local_) {
    local_->attach(setup.rank, ref.gpu->allocator);
  } else {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config_.timeout_s));
    nccl_->connect(setup.rank, static_cast<int>(ranks_.size()), id_, ref.gpu->allocator, deadline, setup.stop);
  }
  return std::make_unique<CudaRank>(*this, setup, ref);
}

}  // namespace
}  // namespace cuda

std::unique_ptr<CudaBackend> make_cuda_backend(const Model& model, std::vector<LayerRange> stage_layers,
                                               const Schedule& lowered, const CudaBackendConfig& config) {
  return std::make_unique<cuda::CudaBackendImpl>(model, std::move(stage_layers), lowered, config);
}

}  // namespace pw
