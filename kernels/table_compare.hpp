#pragma once
// Two folders of kernel tables side by side (`pipewright kernels compare A B`): for each kind both hold, and
// within it each group of text keys (a dtype, a collective), the shapes both measured and the ratio of B's time
// to A's over them. One's own profile against the published table of the same GPU, or two frameworks' tables
// of one GPU, read this way.
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_table.hpp"

namespace pw {

struct KindComparison {
  std::string kind;   // "gemm_perf"
  std::string group;  // "gemm_dtype=bfloat16": the group's text keys; empty where the kind has none
  long shapes = 0;    // shapes both measured (the faster kernel of each, as the cost model reads them)
  double median = 0, p10 = 0, p90 = 0;  // of B's time over A's, nearest rank
};

// Every kind both folders list, each group's comparison in order; a kind with no shape in both gives one entry
// of 0 shapes. Keys only one table has are left out (their rows fold into the faster at the shared keys), and
// so are the keys naming a kernel (kernel_source, backend): each folder's fastest kernel stands for it.
// For GEMMs also each of A's bf16 and fp8 shapes read from B as the cost model reads it (between B's points,
// kernels/table_grid.hpp), the group marked "B read at A's shapes": a profile's GEMMs, at a model's shapes,
// against a published sweep that measured others.
std::vector<KindComparison> compare_tables(const std::shared_ptr<KernelTables>& a, const std::shared_ptr<KernelTables>& b);

}  // namespace pw
