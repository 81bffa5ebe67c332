#pragma once
// A measured profile: per-layer F, B, W times keyed by layer kind, shape and micro-batch size; activation
// bytes; the rank-to-rank links; the optimizer's rate; the machine. The CPU profiler writes it and the CUDA
// profiler will write the same format (docs/profile-format.md).
#include <optional>
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/layer_work.hpp"
#include "core/model.hpp"
#include "profiler/profiled_model.hpp"
#include "profiler/serving_rates.hpp"

namespace pw {

// A phase's time over repetitions: the median is the number used, p10..p90 its spread.
struct PhaseTiming {
  double median_s = 0;
  double p10_s = 0;
  double p90_s = 0;
  int repetitions = 0;
};

struct LayerProfile {
  std::string kind;   // "embedding", "block" or "head"
  std::string shape;  // layer_shape(): the dimensions that set the layer's cost
  int micro_batch_size = 1;
  int seq_len = 1;
  PhaseTiming forward, backward_input, backward_weight;
  // Blocks: what B adds with selective recomputation (rebuilding the attention softmax from Q and K). Absent
  // when not measured: then the entry does not answer for selective recomputation.
  std::optional<PhaseTiming> selective_recompute;
  // B and W as one backward pass (a BW action), where measured: running them apart can cost more. Absent:
  // B + W.
  std::optional<PhaseTiming> backward;
  double activation_bytes = 0;   // kept from F for B and W
  double weight_grad_bytes = 0;  // kept from B for W
  double output_bytes = 0;       // sent to the next layer
};

struct LinkSample {
  double bytes = 0;
  double time_s = 0;  // one way, median
};

// time = latency_s + bytes / bandwidth_bytes_per_s, fitted to the samples.
struct LinkProfile {
  int src = 0;
  int dst = 1;
  double latency_s = 0;
  double bandwidth_bytes_per_s = 0;
  std::vector<LinkSample> samples;
  // The times did not grow with the size (a busy machine's scheduling noise above every copy): the
  // bandwidth is a lower bound, the largest message's bytes over its time, not a fit. Not in the file.
  bool bandwidth_bounded = false;
};

// One measured collective: `bytes` is the array size (nccl-tests' convention), over `ranks` GPUs whose
// slowest measured link is `link`; time_s the mean of back-to-back runs.
struct CollectiveProfile {
  CollectiveKind kind = CollectiveKind::AllReduce;
  int ranks = 2;
  double bytes = 0;
  double time_s = 0;
  LinkSpec link;
};

struct MachineInfo {
  std::string backend;  // "cpu"
  std::string device;   // e.g. the CPU model name
  int cores = 0;
  int threads_per_rank = 1;
  // CPU: what a hand-over to a rank thread that slept on its receive adds to the link's time (the OS's
  // wake-up; profile_thread_wakeup). 0: not measured (profiles before it, GPUs).
  double wakeup_s = 0;
  // Rank threads taking turns on one core (executor/core_turns.hpp): from one rank's tensor sent to the rank
  // it wakes computing, the turn handed over (profile_turn_handover). 0: not measured.
  double handover_s = 0;
};

// The pipeline runtime whose overheads the profile measured (pipewright.torch.profile under torch.distributed):
// what it spends on each compute call beyond the layers' own work, and on posting each transfer.
struct RuntimeProfile {
  std::string name;      // e.g. "torch.distributed.pipelining 2.15.0"
  // Seconds between one compute call's layers and the next's on one rank with no transfer between them: the
  // schedule's loop and the stage's bookkeeping around each forward, backward or weight-gradient call. A full
  // backward is one such call.
  double action_s = 0;
  // Seconds the rank's thread spends posting each send and each receive (asynchronous operations issued from
  // it) before it goes on; 0 where not measured.
  double transfer_s = 0;
};

struct Profile {
  std::string tool;  // "pipewright <version> profiler (<backend>)"
  MachineInfo machine;
  // The model measured; absent from profiles written before pipewright recorded it (then nothing is checked).
  std::optional<ProfiledModel> model;
  std::vector<LayerProfile> layers;
  std::vector<LinkProfile> links;
  std::vector<CollectiveProfile> collectives;  // the CUDA profiler's with --links; none on CPUs
  double optimizer_s_per_parameter = 0;  // one optimizer step (Adam) per parameter
  std::optional<ServingProfile> serving;  // `profile --serving` and `serve run`'s own
  std::optional<RuntimeProfile> runtime;  // absent: the layers' times are the whole cost of an action

  // The entry for a layer kind, shape and micro-batch shape, or null.
  const LayerProfile* find(const std::string& kind, const std::string& shape, int micro_batch_size, int seq_len) const;
};

// "embedding", "block", "head", "mtp" (BadInput for explicit layers, which carry their own costs).
std::string layer_kind_name(LayerKind kind);
// The dimensions that set a layer's cost, as text: "hidden=64 heads=4 kv_heads=2 head_dim=16 ffn=172
// mlp=swiglu norm=rmsnorm bias=none positions=rotary" for a block; hidden, vocab and positions for the
// embedding; hidden, vocab and norm for the head.
std::string layer_shape(const TransformerConfig& config, LayerKind kind);
// A layer's kind in a profile: its LayerKind's name, or "moe-block" for a block with routed experts (a
// dense block of an MoE model computes as a dense model's block and shares its entries).
std::string profile_kind(const TransformerConfig& config, const Layer& layer);
// Its shape: layer_shape of its kind, for an MoE block followed by the routed experts' figures
// ("experts=4 top_k=2 expert_ffn=12 shared_ffn=8 shared_gate=1 expert_bias=0").
std::string layer_shape(const TransformerConfig& config, const Layer& layer);

// {"format": "pipewright-profile", "version": 1, ...} as docs/profile-format.md describes.
// "fit: latency 12.0 us + size / 8.00 GB/s", with what a bounded bandwidth means after it.
std::string link_fit_text(const LinkProfile& link);

std::string profile_to_json_text(const Profile& profile);
// BadInput naming `source` and the field for anything malformed.
Profile profile_from_json_text(const std::string& text, const std::string& source);
Profile load_profile(const std::string& path);

}  // namespace pw
