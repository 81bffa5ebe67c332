#pragma once
// How long and how much a whole training run takes at a plan's throughput, failures included: the
// compute time T_s = tokens / throughput; interruptions at the system's rate 1/M, M = the per-GPU mean time
// between failures over the GPUs; after each, a restart R and the work since the last checkpoint redone;
// checkpoints of write time d every tau of work. Daly's complete model for exponential failures (J. T. Daly,
// "A higher order estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3), 2006):
//   wall time        T_w = M e^(R/M) (e^((tau + d)/M) - 1) T_s / tau
//   optimum interval tau = sqrt(2 d M) [1 + sqrt(d / (2M)) / 3 + d / (18 M)] - d   for d < 2M, else M
// (Young's first-order interval, 1974, is sqrt(2 d M)); goodput T_s / T_w; interruptions T_w / M.
#include <optional>
#include <string>

#include "core/file_caps.hpp"

namespace pw {

// Llama 3 405B's pre-training (Meta, "The Llama 3 Herd of Models", 2024, section 3.3.4): 419 unexpected
// interruptions in a 54-day snapshot on 16,384 H100s, one per 54 x 24 x 16384 / 419 GPU-hours.
inline constexpr double kLlama3MtbfPerGpuHours = 54.0 * 24 * 16384 / 419;

// The ranges of the run's figures (both ends included), far beyond any real run and keeping every figure
// the command prints finite: 1e18 tokens is 66,000 times Llama 3's 15T.
inline constexpr double kMaxTrainTokens = 1e18;
inline constexpr FigureRange kMtbfPerGpuHoursRange{1, 1e9, "h"};  // or 0: no failures
inline constexpr FigureRange kCheckpointWriteRange{1e-3, 1e6, "s"};
inline constexpr FigureRange kRestartRange{0, 1e6, "s"};
inline constexpr FigureRange kRepairHoursRange{1e-3, 1e6, "h"};
inline constexpr FigureRange kGpuHourPriceRange{0, 1e6, "a GPU-hour"};
// Below this share of the wall time training, a run is refused: failures leave it no time to progress.
inline constexpr double kMinGoodput = 1e-3;

struct TrainingRunSpec {
  double tokens = 0;                    // to train
  double gpus = 0;
  double mtbf_per_gpu_s = kLlama3MtbfPerGpuHours * 3600;  // 0: no failures
  double checkpoint_write_s = 60;       // d: one checkpoint, training stopped meanwhile
  double restart_s = 600;               // R: from an interruption to training again, the checkpoint loaded
  std::optional<double> price_per_gpu_hour;  // currency units per GPU-hour
};

struct TrainingRunCost {
  double compute_s = 0;              // T_s
  double wall_s = 0;                 // T_w
  double checkpoint_interval_s = 0;  // tau (0 without failures: no checkpoint needed for them)
  double interruptions = 0;          // expected
  double goodput = 1;                // T_s / T_w
  double gpu_hours = 0;              // T_w x GPUs
  std::optional<double> cost;        // gpu_hours x price
};

// Daly's optimum interval for write time d and system MTBF M (both seconds, positive).
double daly_checkpoint_interval(double write_s, double system_mtbf_s);
// Daly's expected wall time of `compute_s` of work at interval `interval_s`.
double daly_wall_time(double compute_s, double interval_s, double write_s, double restart_s, double system_mtbf_s);

// The run at `tokens_per_s`. BadInput naming the option for a figure outside its range above, a
// non-positive GPU count or throughput, or failures so frequent the run keeps under kMinGoodput training.
TrainingRunCost training_run_cost(const TrainingRunSpec& spec, double tokens_per_s);

// "15T", "300B", "2.5e12", "1,000M": a count with an optional K, M, B or T (10^3 .. 10^12). BadInput naming
// `option` otherwise.
double parse_token_count(const std::string& text, const std::string& option);

}  // namespace pw
