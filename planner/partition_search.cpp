#include "planner/partition_search.hpp"

#include <algorithm>

#include "core/special_values.hpp"
#include "planner/partition_dp.hpp"

namespace pw {
namespace {

enum class Goal { Improve, Enumerate, Memory, Fit };

class Search {
 public:
  Search(const PartitionProblem& p, Goal goal, double bound, int cap, long budget)
      : p_(p), goal_(goal), bound_(bound), cap_(cap), budget_(budget) {
    if (goal != Goal::Memory && goal != Goal::Fit) suffix_ = suffix_bottlenecks(p, rank_caps(p));
    width_ = static_cast<size_t>(p.layers) + 1;
    ranges_.resize(static_cast<size_t>(p.stages));
    for (int r = 0; r < p.ranks; ++r) {
      const size_t chunks = p.chunk_holdings[static_cast<size_t>(r)].size();
      state_.emplace_back(chunks, 0.0);
      act_.emplace_back(chunks, 0.0);
      wg_.emplace_back(chunks, 0.0);
      working_.emplace_back(chunks, 0.0);
    }
  }

  SearchOutcome run() {
    out_.value = kInf;
    dfs(0, 0, goal_ == Goal::Memory || goal_ == Goal::Fit ? -kInf : 0.0);
    out_.complete = !stopped_ || (goal_ == Goal::Fit && !out_.splits.empty());
    return out_;
  }

 private:
  // The rank's memory counting only the chunks chosen so far: exact once all are chosen, a lower bound
  // before (the others only add). Summed in chunk order, as PartitionProblem::rank_memory sums it.
  double rank_partial(int r) const {
    const size_t ru = static_cast<size_t>(r);
    double state = 0, working = 0;
    for (double x : state_[ru]) state += x;
    for (double x : working_[ru]) working = std::max(working, x);
    double peak = 0;
    for (const Holding& h : (*p_.holdings)[ru]) {
      double bytes = 0;
      for (size_t c = 0; c < act_[ru].size(); ++c) bytes += h.full[c] * act_[ru][c] + h.partial[c] * wg_[ru][c];
      peak = std::max(peak, bytes);
    }
    return state + peak + working;
  }

  bool over(double value) const { return goal_ == Goal::Enumerate ? value > bound_ : value >= bound_; }

  void dfs(int s, int begin, double running) {
    if (stopped_) return;
    if (++nodes_ > budget_) {
      stopped_ = true;
      return;
    }
    const int n = p_.layers, S = p_.stages;
    if (s == S) {
      leaf(running);
      return;
    }
    const int r = p_.stage_rank[static_cast<size_t>(s)];
    const size_t ru = static_cast<size_t>(r), cu = static_cast<size_t>(p_.stage_chunk[static_cast<size_t>(s)]);
    const double limit = p_.rank_limit[ru];
    const int shortest = s == S - 1 ? n : begin + 1;  // the last stage ends at the last layer
    for (int end = n - (S - s - 1); end >= shortest && !stopped_; --end) {
      double next = running;
      const bool memory = goal_ == Goal::Memory || goal_ == Goal::Fit;
      if (!memory) {
        if (over(p_.compute_time(s, begin, end))) continue;
        const double t = p_.stage_time(s, begin, end);
        if (over(t)) continue;
        const double rest = suffix_[static_cast<size_t>(s + 1) * width_ + static_cast<size_t>(end)];
        if (rest == kInf || over(rest)) continue;
        next = std::max(running, t);
      }
      state_[ru][cu] = p_.state_bytes(s, begin, end);
      act_[ru][cu] = p_.act_prefix[static_cast<size_t>(end)] - p_.act_prefix[static_cast<size_t>(begin)];
      wg_[ru][cu] = p_.wg_prefix[static_cast<size_t>(end)] - p_.wg_prefix[static_cast<size_t>(begin)];
      working_[ru][cu] = p_.level_working.front().max(static_cast<size_t>(begin), static_cast<size_t>(end));
      const double excess = rank_partial(r) - limit;
      const bool keep = goal_ == Goal::Memory ? !over(excess) : excess <= 0;
      if (keep) {
        if (memory) next = std::max(running, excess);
        ranges_[static_cast<size_t>(s)] = LayerRange{begin, end - 1};
        dfs(s + 1, end, next);
      }
      state_[ru][cu] = act_[ru][cu] = wg_[ru][cu] = working_[ru][cu] = 0;
    }
  }

  void leaf(double value) {
    switch (goal_) {
      case Goal::Improve:
      case Goal::Memory:
        if (over(value)) return;
        out_.splits.assign(1, ranges_);
        out_.value = value;
        bound_ = value;  // from now on, only strictly better
        break;
      case Goal::Enumerate:
        out_.splits.push_back(ranges_);
        out_.value = std::max(out_.value == kInf ? value : out_.value, value);
        if (static_cast<int>(out_.splits.size()) >= cap_) stopped_ = true;
        break;
      case Goal::Fit:
        out_.splits.assign(1, ranges_);
        out_.value = value;
        stopped_ = true;  // one is all that was asked
        break;
    }
  }

  const PartitionProblem& p_;
  Goal goal_;
  double bound_;
  int cap_;
  long budget_;
  long nodes_ = 0;
  bool stopped_ = false;
  size_t width_ = 0;
  std::vector<double> suffix_;
  std::vector<LayerRange> ranges_;
  std::vector<std::vector<double>> state_, act_, wg_, working_;
  SearchOutcome out_;
};

}  // namespace

SearchOutcome improve_bottleneck(const PartitionProblem& p, double bound, long node_budget) {
  return Search(p, Goal::Improve, bound, 1, node_budget).run();
}

SearchOutcome enumerate_within(const PartitionProblem& p, double limit, int cap, long node_budget) {
  SearchOutcome out = Search(p, Goal::Enumerate, limit, std::max(cap, 1), node_budget).run();
  // Reaching the cap is not running out: the splits found are what was asked for.
  if (static_cast<int>(out.splits.size()) >= cap) out.complete = true;
  return out;
}

SearchOutcome min_rank_excess(const PartitionProblem& p, double bound, long node_budget) {
  return Search(p, Goal::Memory, bound, 1, node_budget).run();
}

SearchOutcome first_fitting_split(const PartitionProblem& p, long node_budget) {
  return Search(p, Goal::Fit, 0, 1, node_budget).run();
}

}  // namespace pw
