#pragma once
// Seconds between two tokens of a request and how many gaps had them (inter-token latency over a run): added as
// the engine finds them, read in increasing order of value, each value once with its total count. Kept as a list
// and put in order when a run or a merge of runs ends: a map took a node per gap found, and with varied lengths
// (every decode step a gap of its own) its insertions and the replicas' merges were a fifth of `serve plan`.
#include <algorithm>
#include <initializer_list>
#include <utility>
#include <vector>

namespace pw {

class GapCounts {
 public:
  using Entry = std::pair<double, long>;  // seconds, gaps

  GapCounts() = default;
  GapCounts(std::initializer_list<Entry> entries) : entries_(entries) { settle(); }

  void add(double seconds, long gaps) {
    entries_.emplace_back(seconds, gaps);
    settled_ = false;
  }
  void add(const GapCounts& more) {
    entries_.insert(entries_.end(), more.entries_.begin(), more.entries_.end());
    settled_ = entries_.empty();
  }
  // In increasing order of value, equal values made one with their counts summed: what the readers below see.
  void settle() {
    std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) { return a.first < b.first; });
    size_t out = 0;
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (out > 0 && entries_[out - 1].first == entries_[i].first) entries_[out - 1].second += entries_[i].second;
      else entries_[out++] = entries_[i];
    }
    entries_.resize(out);
    settled_ = true;
  }
  bool settled() const { return settled_; }

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }
  friend bool operator==(const GapCounts&, const GapCounts&) = default;

 private:
  std::vector<Entry> entries_;
  bool settled_ = true;
};

}  // namespace pw
