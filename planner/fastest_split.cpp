#include "planner/fastest_split.hpp"

#include <algorithm>

#include "core/special_values.hpp"
#include "planner/search_bounds.hpp"

namespace pw {
namespace {

class BranchAndBound {
 public:
  BranchAndBound(const PartitionProblem& p, const FastestSplitOptions& o,
                 const std::function<double(const std::vector<LayerRange>&, double)>& judge)
      : p_(p), o_(o), judge_(judge), m_(o.microbatches) {
    const size_t ranks = static_cast<size_t>(p.ranks);
    rank_head_.assign(ranks, -1.0);
    rank_tail_.assign(ranks, 0.0);
    rank_fb_.assign(ranks, 0.0);
    rank_all_.assign(ranks, 0.0);
    ranges_.resize(static_cast<size_t>(p.stages));
    // The remaining layers' F + B, and F + B + W, on whichever GPU class runs them: the least over classes,
    // layer by layer.
    const size_t n = static_cast<size_t>(p.layers);
    rest_fb_.assign(n + 1, 0.0);
    rest_all_.assign(n + 1, 0.0);
    for (size_t i = 0; i < n; ++i) {
      double least = kInf, least_all = kInf;
      for (size_t c = 0; c < p.phase_prefix.size(); ++c) {
        least = std::min(least, layer_fb(c, i));
        least_all = std::min(least_all, layer_fb(c, i) + p.phase_prefix[c].w[i + 1] - p.phase_prefix[c].w[i]);
      }
      rest_fb_[i + 1] = rest_fb_[i] + least;
      rest_all_[i + 1] = rest_all_[i] + least_all;
    }
    const Phases last = phases(p.stages - 1, p.layers - 1, p.layers);
    last_fb_ = last.f + last.b;
    // open_[k]: the ranks holding a stage after k.
    open_.resize(static_cast<size_t>(p.stages));
    for (int k = 0; k < p.stages; ++k) {
      std::vector<char> seen(static_cast<size_t>(p.ranks), 0);
      for (int t = k + 1; t < p.stages; ++t) seen[static_cast<size_t>(p.stage_rank[static_cast<size_t>(t)])] = 1;
      for (int r = 0; r < p.ranks; ++r)
        if (seen[static_cast<size_t>(r)]) open_[static_cast<size_t>(k)].push_back(r);
    }
  }

  FastestSplit run(const std::vector<LayerRange>& incumbent, double step) {
    best_.ranges = incumbent;
    best_.step_time_s = step;
    dfs(0, 0, 0.0, 0.0);
    best_.complete = !stopped_;
    best_.nodes = nodes_;
    return best_;
  }

 private:
  struct Phases {
    double f, b, w;
  };

  Phases phases(int s, int begin, int end) const {
    const PartitionProblem::PhasePrefix& q = p_.phase_prefix[static_cast<size_t>(p_.stage_class[static_cast<size_t>(s)])];
    const size_t a = static_cast<size_t>(begin), z = static_cast<size_t>(end);
    Phases out{q.f[z] - q.f[a] + p_.dispatch_s, q.b[z] - q.b[a] + p_.dispatch_s, q.w[z] - q.w[a] + p_.w_dispatch_s};
    if (!o_.composites) {
      out.f += q.comm_f[z] - q.comm_f[a];
      out.b += q.comm_b[z] - q.comm_b[a];
    }
    return out;
  }

  // The least seconds the boundary after stage s (ending before layer `end`) takes one way.
  double transfer(int s, int end) const {
    if (s + 1 >= p_.stages || !p_.remote[static_cast<size_t>(s)]) return 0;
    const double bytes = p_.cut[static_cast<size_t>(end) - 1];
    return std::min(one_way(p_.forward_link[static_cast<size_t>(s)], bytes),
                    one_way(p_.backward_link[static_cast<size_t>(s)], bytes));
  }

  // Layer i's F + B on GPU class c, as phases() counts them.
  double layer_fb(size_t c, size_t i) const {
    const PartitionProblem::PhasePrefix& q = p_.phase_prefix[c];
    double t = q.f[i + 1] - q.f[i] + q.b[i + 1] - q.b[i];
    if (!o_.composites) t += q.comm_f[i + 1] - q.comm_f[i] + q.comm_b[i + 1] - q.comm_b[i];
    return t;
  }

  double threshold() const { return best_.step_time_s; }
  // Rounding apart (the simulator adds the same numbers in another order): a split that ties the incumbent
  // is judged too, so that the result is the least step time exactly.
  bool beaten(double bound) const { return exceeds(bound, threshold()); }

  // The last stage's bound from stage k on, over the layers from `begin`, whatever the stages hold.
  double rest_bound(int k, int begin, double head, double tail) const {
    const int n = p_.layers;
    const int rest = p_.stages - k;
    return head + tail + rest_fb_[static_cast<size_t>(n)] - rest_fb_[static_cast<size_t>(begin)] +
           2 * rest * p_.dispatch_s + (m_ - 1) * last_fb_;
  }

  // After stage k ends before layer `end`: the remaining layers' work goes to the ranks that still hold a
  // stage, each of which already has its assigned work after its head (a rank not started yet: after the
  // next stage's head at least). However the rest is shared, the busiest of them ends no earlier than
  // their average.
  double share_bound(int k, int end, double next_head) const {
    const std::vector<int>& open = open_[static_cast<size_t>(k)];
    if (open.empty()) return 0;
    const int n = p_.layers;
    double total = m_ * (rest_all_[static_cast<size_t>(n)] - rest_all_[static_cast<size_t>(end)] +
                         (2 * p_.dispatch_s + p_.w_dispatch_s) * (p_.stages - k - 1));
    for (int r : open) {
      const size_t ru = static_cast<size_t>(r);
      total += rank_head_[ru] < 0 ? next_head : rank_head_[ru] + rank_all_[ru];
    }
    return total / static_cast<double>(open.size());
  }

  void dfs(int k, int begin, double head, double tail) {
    if (stopped_) return;
    const int n = p_.layers, S = p_.stages;
    if (k == S) {
      leaf();
      return;
    }
    const int r = p_.stage_rank[static_cast<size_t>(k)];
    const size_t ru = static_cast<size_t>(r);
    const double limit = p_.rank_limit[ru];
    const bool first_of_rank = rank_head_[ru] < 0;
    const double rank_head = first_of_rank ? head : rank_head_[ru];
    const double rank_tail = first_of_rank ? tail : rank_tail_[ru];
    const int shortest = k == S - 1 ? n : begin + 1;
    const int longest = n - (S - k - 1);
    for (int end = shortest; end <= longest && !stopped_; ++end) {
      if (++nodes_ > o_.node_budget) {
        stopped_ = true;
        return;
      }
      // Every bound below only grows with `end`: the first one reached ends the loop.
      if (p_.stage_memory(k, begin, end) > limit) break;
      const Phases ph = phases(k, begin, end);
      if (beaten(head + m_ * (ph.f + ph.b) + tail)) break;
      const double fb = rank_fb_[ru] + m_ * (ph.f + ph.b), all = rank_all_[ru] + m_ * (ph.f + ph.b + ph.w);
      if (beaten(rank_head + all) || beaten(rank_head + fb + rank_tail)) break;
      const double x = transfer(k, end);
      const double next_head = head + ph.f + x, next_tail = tail + ph.b + x;
      if (k + 1 < S && beaten(rest_bound(k + 1, end, next_head, next_tail))) continue;

      const double saved_fb = rank_fb_[ru], saved_all = rank_all_[ru];
      rank_fb_[ru] = fb;
      rank_all_[ru] = all;
      if (first_of_rank) {
        rank_head_[ru] = head;
        rank_tail_[ru] = tail;
      }
      if (k + 1 < S && beaten(share_bound(k, end, next_head))) {
        rank_fb_[ru] = saved_fb;
        rank_all_[ru] = saved_all;
        if (first_of_rank) rank_head_[ru] = -1.0;
        continue;
      }
      ranges_[static_cast<size_t>(k)] = LayerRange{begin, end - 1};
      dfs(k + 1, end, next_head, next_tail);
      rank_fb_[ru] = saved_fb;
      rank_all_[ru] = saved_all;
      if (first_of_rank) rank_head_[ru] = -1.0;
    }
  }

  void leaf() {
    if (best_.judged >= o_.judge_budget) {
      stopped_ = true;
      return;
    }
    ++best_.judged;
    const double step = judge_(ranges_, threshold());
    if (step < threshold()) {
      best_.step_time_s = step;
      best_.ranges = ranges_;
    }
  }

  const PartitionProblem& p_;
  const FastestSplitOptions& o_;
  const std::function<double(const std::vector<LayerRange>&, double)>& judge_;
  const double m_;
  std::vector<double> rank_head_, rank_tail_, rank_fb_, rank_all_;
  std::vector<double> rest_fb_, rest_all_;  // prefix sums
  double last_fb_ = 0;                       // the last layer's F + B on the last stage, dispatch included
  std::vector<std::vector<int>> open_;
  std::vector<LayerRange> ranges_;
  FastestSplit best_;
  long nodes_ = 0;
  bool stopped_ = false;
};

}  // namespace

FastestSplit fastest_split(const PartitionProblem& p, const FastestSplitOptions& options,
                           const std::vector<LayerRange>& incumbent, double incumbent_step_s,
                           const std::function<double(const std::vector<LayerRange>&, double)>& judge) {
  BranchAndBound search(p, options, judge);
  return search.run(incumbent, incumbent_step_s);
}

}  // namespace pw
