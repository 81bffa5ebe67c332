#include "core/error.hpp"
#include "schedules/ir.hpp"
#include "schedules/parts.hpp"

namespace pw {

namespace {

// The neighbour exists in the stage's copy of the model (toward the next stage or the previous one) and sits
// on another rank than `stage`: the tensor between them must travel.
bool crosses_ranks(const Schedule& s, int stage, bool toward_next) {
  if (!(toward_next ? s.has_next(stage) : s.has_previous(stage))) return false;
  const int peer = toward_next ? stage + 1 : stage - 1;
  return s.placement.rank_of(peer) != s.placement.rank_of(stage);
}

bool stage_known(const Placement& placement, int stage) { return stage >= 0 && stage < placement.stages(); }

}  // namespace

Schedule lower(const Schedule& compute_only) {
  Schedule out = compute_only.lowered ? strip_comm(compute_only) : compute_only;
  const Placement& pl = out.placement;
  for (auto& list : out.ranks) {
    std::vector<Action> lowered;
    lowered.reserve(list.size() * 2);
    for (const Action& a : list) {
      const std::vector<WorkPart> parts = parts_of(a);
      // Receives are issued just before the consumer so that no rank waits on a tensor it does not
      // need yet; sends go right after the producer so that the consumer can start as early as possible.
      for (const WorkPart& p : parts) {
        if (!stage_known(pl, p.stage)) continue;
        if (p.part == Part::F && crosses_ranks(out, p.stage, false))
          lowered.push_back(Action{Op::RecvF, p.stage, p.microbatch});
        if (p.part == Part::B && crosses_ranks(out, p.stage, true))
          lowered.push_back(Action{Op::RecvB, p.stage, p.microbatch});
      }
      lowered.push_back(a);
      for (const WorkPart& p : parts) {
        if (!stage_known(pl, p.stage)) continue;
        if (p.part == Part::F && crosses_ranks(out, p.stage, true))
          lowered.push_back(Action{Op::SendF, p.stage, p.microbatch});
        if (p.part == Part::B && crosses_ranks(out, p.stage, false))
          lowered.push_back(Action{Op::SendB, p.stage, p.microbatch});
      }
    }
    list = std::move(lowered);
  }
  out.lowered = true;
  return out;
}

Schedule strip_comm(const Schedule& lowered) {
  Schedule out = lowered;
  for (auto& list : out.ranks) std::erase_if(list, [](const Action& a) { return is_comm(a.op); });
  out.lowered = false;
  return out;
}

}  // namespace pw
