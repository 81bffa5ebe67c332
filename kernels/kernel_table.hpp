#pragma once
// Measured kernel times in pipewright's kernel-table format (docs/kernel-tables.md): a folder with a
// manifest.json naming the GPU system, the software and its versions and the source, and one <kind>.json a
// table. A table has key columns (numbers, or text such as a dtype) and time columns in seconds, a row each
// measured shape. The same format comes from `pipewright kernels import aiconfigurator` (NVIDIA's published
// tables) and, for the GPU at hand, from the profiler; the cost model reads both alike.
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pw {

inline constexpr const char* kKernelTableFormat = "pipewright-kernel-table";
inline constexpr int kKernelTableFormatVersion = 1;
// The largest published table holds about 110,000 rows (an H200's GEMMs); a table past these is refused.
inline constexpr long kMaxKernelTableRows = 2'000'000;
inline constexpr long kMaxKernelTableColumns = 64;
inline constexpr long kMaxKernelTables = 1'000;  // tables one manifest lists

class KernelTable {
 public:
  // Reads one table file; BadInput naming the file (and row) when it is not one.
  static KernelTable load(const std::string& path);

  const std::string& kind() const { return kind_; }
  const std::string& path() const { return path_; }
  long rows() const { return rows_; }
  const std::vector<std::string>& keys() const { return keys_; }
  const std::vector<std::string>& times() const { return times_; }
  // The column's index among keys() or times(), or -1.
  int key_index(const std::string& name) const;
  int time_index(const std::string& name) const;
  bool key_is_text(int key) const { return text_[static_cast<size_t>(key)]; }
  // A numeric key's value on a row; a text key's value; a time in seconds.
  double number(int key, long row) const { return numbers_[static_cast<size_t>(key)][static_cast<size_t>(row)]; }
  const std::string& text(int key, long row) const;
  double seconds(int time, long row) const { return seconds_[static_cast<size_t>(time)][static_cast<size_t>(row)]; }
  // The distinct values a text key takes, in first-seen order.
  const std::vector<std::string>& text_values(int key) const { return dictionary_[static_cast<size_t>(key)]; }

 public:
  // What a file's reading fills in (kernel_table.cpp), before it becomes a table.
  struct Columns {
    std::string kind;
    long rows = 0;
    std::vector<std::string> keys, times;
    std::vector<bool> text;
    std::vector<std::vector<double>> numbers;
    std::vector<std::vector<int>> text_ids;
    std::vector<std::vector<std::string>> dictionary;
    std::vector<std::vector<double>> seconds;
  };

 private:
  std::string kind_, path_;
  long rows_ = 0;
  std::vector<std::string> keys_, times_;
  std::vector<bool> text_;
  std::vector<std::vector<double>> numbers_;             // [key][row], numeric keys
  std::vector<std::vector<int>> text_ids_;               // [key][row], text keys: index into dictionary_
  std::vector<std::vector<std::string>> dictionary_;     // [key]
  std::vector<std::vector<double>> seconds_;             // [time][row]
};

// One entry of a manifest: a table's kind, file and row count, and the source file it was made from.
struct KernelTableEntry {
  std::string kind, file, from;
  long rows = 0;
};

// A folder of tables. Tables are read when first asked for, so that a run loads only the kinds it prices.
class KernelTables {
 public:
  // Reads DIR/manifest.json (or the manifest itself when `path` names it); BadInput naming the field.
  static std::shared_ptr<KernelTables> open(const std::string& path);

  const std::string& folder() const { return folder_; }
  const std::string& system() const { return system_; }
  const std::string& software() const { return software_; }
  const std::map<std::string, std::string>& versions() const { return versions_; }
  const std::string& source() const { return source_; }
  // The measured GPU's memory bandwidth where the manifest records it (gpu.hbm_bytes_per_s), else 0: an A100
  // SXM of 40 GB (1.56 TB/s) is not the one of 80 GB (2.04 TB/s) its name shares.
  double hbm_bytes_per_s() const { return hbm_bytes_per_s_; }
  const std::vector<KernelTableEntry>& entries() const { return entries_; }
  bool has(const std::string& kind) const;
  // The table of `kind`, read on first use; nullptr when the manifest lists none.
  const KernelTable* table(const std::string& kind);

 private:
  std::string folder_, system_, software_, source_;
  double hbm_bytes_per_s_ = 0;
  std::map<std::string, std::string> versions_;
  std::vector<KernelTableEntry> entries_;
  std::map<std::string, std::unique_ptr<KernelTable>> loaded_;
};

}  // namespace pw
