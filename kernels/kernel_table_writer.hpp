#pragma once
// Writes a folder of kernel tables in pipewright's format (docs/kernel-tables.md), as `profile --kernels-out`
// makes one from what it measured: the same files `pipewright kernels import` writes, so the cost model, `kernels
// compare` and `kernels coverage` read a user's own measurements and a published database alike.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pw {

struct KernelTableOut {
  std::string kind;               // "gemm_perf"
  std::vector<std::string> keys;  // "gemm_dtype", "m", "n", "k"
  nlohmann::json rows = nlohmann::json::array();  // each: the keys' values, then time_s
  nlohmann::json measured_on;     // {"device": ..., "tool": ...}
};

struct KernelTablesOut {
  std::string system;    // "h200", "cpu": what gpu_matches_system reads
  std::string software;  // "pipewright 0.1.0 profiler (cuda)"
  std::string source;    // the manifest's source name
  double hbm_bytes_per_s = 0;  // the measured memory bandwidth, 0 when not measured
  std::vector<KernelTableOut> tables;
};

// Writes `tables` into the new folder `folder` (beside it first, then renamed, so a failure leaves no half
// folder). BadInput "--kernels-out: '<folder>' exists; give a new folder (nothing is overwritten)" when the
// path exists, as anything but an empty folder; RuntimeFailure when the files cannot be written.
void write_kernel_tables(const std::string& folder, const KernelTablesOut& tables);
// The same refusal, before the measuring starts.
void check_new_kernel_folder(const std::string& folder);

}  // namespace pw
