#pragma once
// A table's measured points as a grid over its numeric axes, and the time at any shape read from it
// (docs/kernel-tables.md, "Reading between the points"):
// - a measured shape: its time, exactly;
// - inside the measured range on every axis: the cell's corners interpolated multilinearly in log(time)
//   against log(axis) (a GEMM twice as long in k takes twice the time: exact for a power law);
// - past the largest measured value of an axis by at most kExtrapolationFactor: the edge's time scaled by
//   the ratio (time proportional to the axis: m, n, k, tokens, bytes), below the smallest by at most that
//   factor: the edge's time (no kernel is faster than the smallest measured);
// - anything else (further out, a cell with a corner never measured, no row with the selected keys):
//   no time, and a note saying why, for the caller to fall back to the analytic model.
#include <map>
#include <string>
#include <vector>

#include "kernels/kernel_table.hpp"

namespace pw {

inline constexpr double kExtrapolationFactor = 2.0;

enum class TableHow { Measured, Interpolated, Extrapolated, Missing };
const char* to_string(TableHow how);

struct TableTime {
  double seconds = 0;
  TableHow how = TableHow::Missing;
  std::string note;  // why Missing or Extrapolated
  bool found() const { return how != TableHow::Missing; }
};

// The rows whose text and exact keys equal `select`, indexed by the values of `axes`.
class TableGrid {
 public:
  struct Select {
    std::vector<std::pair<std::string, std::string>> text;  // key = value
    std::vector<std::pair<std::string, double>> number;     // key = value
    // key = value where the table has the column (a window or beam width older tables do not record: every
    // row is then of that value)
    std::vector<std::pair<std::string, double>> number_if_present;
    // numerator key / denominator key = value: attention's query heads a kv head (its GQA group), whatever
    // the heads.
    struct Ratio {
      std::string numerator, denominator;
      double value;
    };
    std::vector<Ratio> ratio;
  };
  // BadInput naming the table when a column is absent or of the other type.
  TableGrid(const KernelTable& table, const Select& select, std::vector<std::string> axes, const std::string& time = "time_s");

  long points() const { return static_cast<long>(times_.size()); }
  const std::vector<std::string>& axes() const { return axes_; }
  double largest(size_t axis) const { return values_[axis].empty() ? 0 : values_[axis].back(); }
  // The time at `at` (one value an axis, in axes() order).
  TableTime at(const std::vector<double>& at) const;

 private:
  std::string what_;  // "gemm_perf (gemm_dtype=bfloat16)" for notes
  std::vector<std::string> axes_;
  std::vector<std::vector<double>> values_;  // [axis]: the measured values, sorted
  std::map<std::vector<double>, double> times_;
};

}  // namespace pw
