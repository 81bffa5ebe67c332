#include "core/workload.hpp"

#include <limits>
#include <string_view>

#include "core/checked_math.hpp"
#include "core/error.hpp"

namespace pw {

const char* to_string(ParallelConfig::Reshard r) {
  switch (r) {
    case ParallelConfig::Reshard::Default: return "default";
    case ParallelConfig::Reshard::Always: return "always";
    case ParallelConfig::Reshard::Never: return "never";
  }
  return "default";
}

std::optional<ParallelConfig::Reshard> reshard_from_string(const std::string& text) {
  for (auto r : {ParallelConfig::Reshard::Default, ParallelConfig::Reshard::Always, ParallelConfig::Reshard::Never})
    if (text == to_string(r)) return r;
  return std::nullopt;
}

const char* to_string(ParallelConfig::GradSync g) {
  switch (g) {
    case ParallelConfig::GradSync::Default: return "default";
    case ParallelConfig::GradSync::EveryMicrobatch: return "every-microbatch";
    case ParallelConfig::GradSync::LastMicrobatch: return "last-microbatch";
  }
  return "default";
}

std::optional<ParallelConfig::GradSync> grad_sync_from_string(const std::string& text) {
  for (auto g : {ParallelConfig::GradSync::Default, ParallelConfig::GradSync::EveryMicrobatch,
                 ParallelConfig::GradSync::LastMicrobatch})
    if (text == to_string(g)) return g;
  return std::nullopt;
}

const char* to_string(Precision p) { return p == Precision::Fp8 ? "fp8" : "bf16"; }

Precision precision_from_string(const std::string& text) {
  if (text == "bf16") return Precision::Bf16;
  if (text == "fp8") return Precision::Fp8;
  throw_bad_input("--precision: unknown '{}'; use bf16 or fp8", text);
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
    case Recompute::PerStage: return "per-stage";
  }
  return "none";
}

const char* to_string(Workload::Dispatcher d) { return d == Workload::Dispatcher::Flex ? "flex" : "alltoall"; }

Workload::Dispatcher dispatcher_from_string(const std::string& text) {
  if (text == "alltoall") return Workload::Dispatcher::AllToAll;
  if (text == "flex") return Workload::Dispatcher::Flex;
  throw_bad_input("--dispatcher: '{}' is not a token dispatcher; use alltoall or flex (DeepEP, HybridEP)", text);
}

Recompute recompute_from_string(const char* text) {
  const std::string_view t = text ? text : "";
  if (t == "none") return Recompute::None;
  if (t == "selective") return Recompute::Selective;
  if (t == "full") return Recompute::Full;
  if (t == "per-stage") return Recompute::PerStage;
  throw_bad_input("--recompute: unknown mode '{}'; use none, selective, full or per-stage", t);
}

int ParallelConfig::gpus() const {
  return static_cast<int>(bounded_product({tp, cp, pp, dp}, std::numeric_limits<int>::max(),
                                          "GPUs --tp x --cp x --pp x --dp", "use fewer GPUs"));
}

int global_rank(const ParallelConfig& pc, RankOrder order, int tp_idx, int pp_idx, int dp_idx) {
  const int block = pc.tp * pc.cp;
  if (order == RankOrder::TpPpDp) return (dp_idx * pc.pp + pp_idx) * block + tp_idx;
  return (pp_idx * pc.dp + dp_idx) * block + tp_idx;
}

int dp_stride(const ParallelConfig& pc) {
  const int block = pc.tp * pc.cp;
  return pc.order == RankOrder::TpPpDp ? block * pc.pp : block;
}

}  // namespace pw
