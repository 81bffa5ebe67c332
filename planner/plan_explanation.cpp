#include "planner/plan_explanation.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/stage_costs.hpp"
#include "core/units.hpp"

namespace pw {
namespace {

// Whether the link is the network between nodes.
const char* where(const LinkSpec& l) { return l.inter_node ? "across nodes" : "inside a node"; }

// The slowest link between neighbouring pipeline ranks.
LinkSpec pipeline_link(const Scenario& s) {
  const ParallelConfig& pc = s.parallel;
  LinkSpec worst{1e30, 0};
  for (int r = 0; r + 1 < pc.pp; ++r) worst = slower(worst, s.cluster.link(pipeline_rank_gpu(pc, r), pipeline_rank_gpu(pc, r + 1)));
  return worst;
}

std::string binding_line(const Evaluation& ev, const Loss& part) {
  const Scenario& s = ev.scenario;
  const ParallelConfig& pc = s.parallel;
  const std::string share = fmt::format("{}, {} of the step", format_seconds(part.seconds),
                                        format_percent(part.seconds / ev.metrics.step_time_s));
  const GroupLinks links = group_links(s.cluster, pc, 0);
  if (part.part == "idle")
    return fmt::format("the micro-batch count: {} micro-batches over {} pipeline ranks leave this rank idle {} (more "
                       "micro-batches need a larger global batch, a smaller micro-batch or fewer replicas)",
                       pc.microbatches, pc.pp, share);
  if (part.part == "pp")
    return fmt::format("the links between pipeline stages ({}): transfers exposed {}", where(pipeline_link(s)), share);
  if (part.part == "dp") {
    const LinkSpec l = group_link(s.cluster, 0, dp_stride(pc), pc.dp);
    return fmt::format("the data-parallel reduction over dp={} ({}): exposed {}", pc.dp, where(l), share);
  }
  if (part.part == "tp")
    return fmt::format("tp={}'s collectives ({}): {}", pc.tp, where(links.tp), share);
  if (part.part == "cp") return fmt::format("cp={}'s K/V ring ({}): {}", pc.cp, where(links.cp), share);
  if (part.part == "ep") return fmt::format("ep={}'s all-to-alls: {}", pc.ep, share);
  if (part.part == "recompute")
    return fmt::format("memory, through recompute ({}): rebuilding activations takes {}", to_string(s.workload.recompute),
                       share);
  if (part.part == "host")
    return fmt::format("the host: it issues the MoE blocks slower than the GPU runs them, {} waiting (larger "
                       "micro-batches amortize it)",
                       share);
  if (part.part == "optimizer") return fmt::format("the optimizer step: {}", share);
  return fmt::format("compute: {}", share);
}

std::vector<std::string> binding_of(const Evaluation& ev, const StepBreakdown& b) {
  std::vector<std::string> out;
  Loss largest{"compute", b.compute_s};
  bool first = true;
  for (const Loss& l : parts_of(b)) {
    if (l.part == "compute") continue;
    if (first || l.seconds > largest.seconds) largest = l;
    first = false;
  }
  out.push_back(binding_line(ev, largest));
  const Metrics& m = ev.metrics;
  if (m.memory_limit_bytes > 0 && m.peak_memory_bytes >= 0.9 * m.memory_limit_bytes) {
    const RankStats* fullest = &ev.sim.ranks.front();
    for (const RankStats& r : ev.sim.ranks)
      if (r.peak_memory_bytes > fullest->peak_memory_bytes) fullest = &r;
    out.push_back(fmt::format("memory: pipeline rank {} holds {} of {} ({} free)", fullest->rank,
                              format_bytes(fullest->peak_memory_bytes), ev.scenario.cluster.memory_limit_text(m.memory_limit_bytes),
                              format_bytes(m.memory_limit_bytes - fullest->peak_memory_bytes)));
  }
  return out;
}

}  // namespace

std::vector<Loss> parts_of(const StepBreakdown& b) {
  return {{"compute", b.compute_s}, {"recompute", b.recompute_s}, {"tp", b.tp_s},         {"cp", b.cp_s},
          {"ep", b.ep_s},           {"host", b.host_s},           {"pp", b.pp_s},         {"dp", b.dp_s},
          {"optimizer", b.optimizer_s}, {"idle", b.bubble_s}};
}

std::string describe_difference(const Candidate& a, const Candidate& b) {
  std::vector<std::string> d;
  auto num = [&](const char* name, int x, int y) {
    if (x != y) d.push_back(fmt::format("{}={} (not {})", name, x, y));
  };
  num("tp", a.tp, b.tp);
  num("cp", a.cp, b.cp);
  num("ep", a.ep, b.ep);
  num("etp", a.etp, b.etp);
  num("pp", a.pp, b.pp);
  num("dp", a.dp, b.dp);
  num("vpp", a.vpp, b.vpp);
  num("micro-batch size", a.micro_batch_size, b.micro_batch_size);
  if (a.schedule != b.schedule) d.push_back(fmt::format("{} (not {})", a.schedule, b.schedule));
  if (a.recompute != b.recompute)
    d.push_back(fmt::format("recompute {} (not {})", to_string(a.recompute), to_string(b.recompute)));
  if (a.order != b.order) d.push_back(fmt::format("rank order {} (not {})", to_string(a.order), to_string(b.order)));
  if (a.precision != b.precision) d.push_back(fmt::format("{} (not {})", to_string(a.precision), to_string(b.precision)));
  num("ZeRO", a.zero, b.zero);
  if (d.empty()) return "the same configuration";
  std::string out = d.front();
  for (size_t i = 1; i < d.size(); ++i) out += ", " + d[i];
  return out;
}

namespace {

std::vector<std::string> choice_of(const std::vector<Plan>& plans, const std::optional<Plan>& fastest, double prefer_within) {
  std::vector<std::string> out;
  const Plan& best = plans.front();
  const double step = best.evaluation.metrics.step_time_s;
  if (best.config.pp > 1) {
    const auto shallower = std::find_if(plans.begin() + 1, plans.end(), [&](const Plan& p) { return p.config.pp < best.config.pp; });
    if (shallower != plans.end())
      out.push_back(fmt::format("depth: pp {}; the fastest listed plan with fewer pipeline ranks, #{} (pp {}), takes {} "
                                "longer a step",
                                best.config.pp, shallower - plans.begin() + 1, shallower->config.pp,
                                format_percent(shallower->evaluation.metrics.step_time_s / step - 1)));
    else
      out.push_back(fmt::format("depth: pp {}; no listed plan has fewer pipeline ranks (--max-pp {} searches only those)",
                                best.config.pp, best.config.pp - 1));
  }
  if (fastest) {
    const Metrics& f = fastest->evaluation.metrics;
    std::vector<std::string> why;
    if (best.config.pp < fastest->config.pp)
      why.push_back(fmt::format("fewer pipeline ranks ({}, not {})", best.config.pp, fastest->config.pp));
    else if (best.evaluation.metrics.peak_memory_bytes < f.peak_memory_bytes)
      why.push_back(fmt::format("less peak memory ({}, not {})", format_bytes(best.evaluation.metrics.peak_memory_bytes),
                                format_bytes(f.peak_memory_bytes)));
    out.push_back(fmt::format("preferred: the fastest plan found, {}, takes {} a step, {} less; within {} of it plan 1 "
                              "has {}",
                              describe(fastest->config), format_seconds(f.step_time_s), format_percent(1 - f.step_time_s / step),
                              format_percent(prefer_within), why.empty() ? "the same depth and memory" : why.front()));
  }
  return out;
}

}  // namespace

PlanExplanation explain_plans(const std::vector<Plan>& plans, const CostModel& cost, const std::optional<Plan>& fastest,
                              double prefer_within) {
  PlanExplanation out;
  if (plans.empty()) return out;
  const Plan& best = plans.front();
  out.step = break_down(best.evaluation, cost);
  out.bubble_fraction = best.evaluation.metrics.bubble_fraction;
  out.ranks = best.config.pp;
  out.binding = binding_of(best.evaluation, out.step);
  out.choice = choice_of(plans, fastest, prefer_within);
  const std::vector<Loss> best_parts = parts_of(out.step);
  for (size_t i = 1; i < plans.size(); ++i) {
    RunnerUp r;
    r.rank = static_cast<int>(i) + 1;
    const StepBreakdown b = break_down(plans[i].evaluation, cost);
    r.loss_s = b.step_s - out.step.step_s;
    r.differs = describe_difference(plans[i].config, best.config);
    const std::vector<Loss> parts = parts_of(b);
    r.most = Loss{parts.front().part, parts.front().seconds - best_parts.front().seconds};
    for (size_t k = 1; k < parts.size(); ++k)
      if (parts[k].seconds - best_parts[k].seconds > r.most.seconds)
        r.most = Loss{parts[k].part, parts[k].seconds - best_parts[k].seconds};
    r.line = fmt::format("#{} {}{} ({}{}): {}; most in {} (+{})", r.rank, r.loss_s >= 0 ? "+" : "-",
                         format_seconds(std::fabs(r.loss_s)), r.loss_s >= 0 ? "+" : "-",
                         format_percent(std::fabs(r.loss_s) / out.step.step_s), r.differs, r.most.part,
                         format_seconds(r.most.seconds));
    out.runners_up.push_back(std::move(r));
  }
  return out;
}

}  // namespace pw
