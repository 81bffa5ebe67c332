#include "sim/step_breakdown.hpp"

#include <algorithm>

#include "core/stage_costs.hpp"

namespace pw {
namespace {

// The same costs with point-to-point transfers as good as free (a finite bandwidth: the link model divides
// by it).
class FreeTransfers : public CostModelOver {
 public:
  using CostModelOver::CostModelOver;
  std::string name() const override { return below_.name() + " with free transfers"; }
  LinkSpec p2p_link(const LinkSpec& nominal) const override {
    LinkSpec l = nominal;
    l.bandwidth_bytes_per_s = 1e30;
    l.latency_s = 0;
    return l;
  }
};

struct Inside {
  double recompute = 0, tp = 0, cp = 0, ep = 0, host = 0, zero3 = 0;
  double total = 0;  // the stage's F + B + W as the simulator charges them
};

// Per micro-batch, what one stage's compute actions hold besides compute.
Inside inside_stage(const Scenario& s, const StageReport& st, const LayerWorks& work,
                    const CostModel& cost, int replica) {
  const ParallelConfig& pc = s.parallel;
  const int gpu_index = pipeline_rank_gpu(pc, st.rank, replica);
  const GroupLinks links = group_links(s.cluster, pc, gpu_index);
  const GpuSpec& gpu = s.cluster.gpu_at(gpu_index);
  LinkSpec free_link = links.tp;
  free_link.bandwidth_bytes_per_s = 1e30;
  free_link.latency_s = 0;
  Workload plain = s.workload;
  plain.recompute = Recompute::None;
  Inside in;
  double layers = 0;
  for (int i = st.layers.first; i <= st.layers.last; ++i) {
    const Layer& layer = s.model.layers[static_cast<size_t>(i)];
    const LayerWork& w = work[static_cast<size_t>(i)];
    const LayerWork none = layer_work(s.model, layer, plain);
    for (Phase ph : {Phase::Forward, Phase::BackwardInput, Phase::BackwardWeight}) {
      const double at_level = layer_phase_time(cost, layer, w, ph, gpu, links, pc.tp);
      const PhaseCost without = layer_phase_cost(cost, layer, none, ph, gpu, links, pc.tp);
      layers += at_level;
      in.recompute += at_level - without.time();
      in.tp += cost.phase_time(layer, none, ph, gpu, links.tp, pc.tp) - cost.phase_time(layer, none, ph, gpu, free_link, pc.tp);
      in.cp += cost.cp_ring_time(none, ph, gpu, links.cp);
      in.ep += cost.expert_comm_time(none, ph, links.ep);
      in.host += without.host_wait();
    }
  }
  const StageCost& c = st.cost;
  in.total = c.forward_s + c.backward_input_s + c.backward_weight_s;
  in.zero3 = std::max(0.0, in.total - layers - 3 * cost.action_overhead_s());
  return in;
}

}  // namespace

StepBreakdown break_down(const Evaluation& ev, const CostModel& cost) {
  const Scenario& s = ev.scenario;
  StepBreakdown out;
  out.step_s = ev.metrics.step_time_s;
  if (ev.sim.ranks.empty()) return out;
  const RankStats* busiest = &ev.sim.ranks.front();
  for (const RankStats& r : ev.sim.ranks)
    if (r.busy_s > busiest->busy_s) busiest = &r;
  out.rank = busiest->rank;

  // With copies of the model each stage runs its copy's micro-batches.
  const std::vector<LayerRange> ranges = model_parts(ev);
  const LayerWorks work = staged_layer_work(s.model, s.workload, ranges, s.stage_recompute);
  const double m = static_cast<double>(s.parallel.microbatches) / ev.schedule.copies;
  Inside rank;
  std::vector<double> optimizer(ev.sim.ranks.size(), 0.0);
  for (const StageReport& st : ev.stages) {
    optimizer[static_cast<size_t>(st.rank)] += st.cost.optimizer_s;
    if (st.rank != out.rank) continue;
    const Inside in = inside_stage(s, st, work, cost, ev.replica);
    rank.recompute += m * in.recompute;
    rank.tp += m * in.tp;
    rank.cp += m * in.cp;
    rank.ep += m * in.ep;
    rank.host += m * in.host;
    rank.zero3 += m * in.zero3;
    rank.total += m * in.total;
  }
  // An F&B composite hides all-to-alls (the busy time falls short of the actions' sum); transfers in flight
  // slow compute down (it exceeds it).
  const double busy = busiest->busy_s;
  const double hidden = std::max(0.0, rank.total - busy);
  const double slowed = std::max(0.0, busy - rank.total);
  out.recompute_s = rank.recompute;
  out.tp_s = rank.tp;
  out.cp_s = rank.cp;
  out.ep_s = std::max(0.0, rank.ep - hidden);
  out.host_s = rank.host;
  out.dp_s = rank.zero3;
  out.compute_s =
      std::max(0.0, busy - out.recompute_s - out.tp_s - out.cp_s - out.ep_s - out.host_s - out.dp_s - slowed);

  double idle = std::max(0.0, out.step_s - busy);
  out.optimizer_s = std::min(idle, s.synchronous_optimizer ? *std::max_element(optimizer.begin(), optimizer.end())
                                                            : optimizer[static_cast<size_t>(out.rank)]);
  idle -= out.optimizer_s;
  const double exposed_dp = std::min(idle, ev.metrics.exposed_dp_comm_s);
  out.dp_s += exposed_dp;
  idle -= exposed_dp;

  Scenario fixed = s;
  fixed.ranges = ranges;
  const FreeTransfers free(cost);
  const double without_transfers = evaluate(fixed, free).metrics.step_time_s;
  const double transfers = std::min(idle, std::max(0.0, out.step_s - without_transfers));
  out.pp_s = transfers + slowed;
  out.bubble_s = idle - transfers;
  return out;
}

}  // namespace pw
