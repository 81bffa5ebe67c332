#include "schedules/ir.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.hpp"
#include "schedules/parts.hpp"

namespace pw {

bool is_compute(Op op) {
  switch (op) {
    case Op::F:
    case Op::B:
    case Op::W:
    case Op::BW:
    case Op::FB:
      return true;
    default:
      return false;
  }
}

bool is_comm(Op op) { return !is_compute(op); }

const char* to_string(Op op) {
  switch (op) {
    case Op::F: return "F";
    case Op::B: return "B";
    case Op::W: return "W";
    case Op::BW: return "BW";
    case Op::FB: return "FB";
    case Op::SendF: return "SEND_F";
    case Op::RecvF: return "RECV_F";
    case Op::SendB: return "SEND_B";
    case Op::RecvB: return "RECV_B";
  }
  return "?";
}

std::string to_text(const Action& a) {
  if (a.op == Op::FB) return fmt::format("{}F{}&{}BW{}", a.stage, a.microbatch, a.stage2, a.microbatch2);
  return fmt::format("{}{}{}", a.stage, to_string(a.op), a.microbatch);
}

namespace {

[[noreturn]] void bad_action(const std::string& text) {
  throw_bad_input("action '{}': expected <stage><op><micro-batch> such as 2F0, 0B3, 1W3, 1BW3, 3SEND_F1", text);
}

// Digits only, at most 9 of them so that the value fits an int.
bool parse_index(const std::string& digits, int& value) {
  if (digits.empty() || digits.size() > 9) return false;
  value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    value = value * 10 + (c - '0');
  }
  return true;
}

// One action without '&'; false when the text is not of the form <stage><op><micro-batch>.
bool parse_simple(const std::string& text, Action& a) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  size_t j = i;
  while (j < text.size() && (std::isupper(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
  const std::string op = text.substr(i, j - i);
  if (!parse_index(text.substr(0, i), a.stage) || !parse_index(text.substr(j), a.microbatch)) return false;
  static constexpr Op simple_ops[] = {Op::F,     Op::B,     Op::W,     Op::BW,
                                      Op::SendF, Op::RecvF, Op::SendB, Op::RecvB};
  for (Op candidate : simple_ops) {
    if (op == to_string(candidate)) {
      a.op = candidate;
      return true;
    }
  }
  return false;
}

}  // namespace

Action action_from_text(const std::string& text) {
  const auto amp = text.find('&');
  if (amp == std::string::npos) {
    Action a;
    if (!parse_simple(text, a)) bad_action(text);
    return a;
  }
  Action f, bw;
  if (!parse_simple(text.substr(0, amp), f) || !parse_simple(text.substr(amp + 1), bw) || f.op != Op::F ||
      bw.op != Op::BW) {
    throw_bad_input("action '{}': a composite is <F action>&<BW action> such as 1F4&1BW0", text);
  }
  return Action{Op::FB, f.stage, f.microbatch, bw.stage, bw.microbatch};
}

Placement Placement::loop(int ranks, int chunks) {
  Placement p;
  p.kind = PlacementKind::Loop;
  p.ranks = ranks;
  for (int s = 0; s < ranks * chunks; ++s) p.stage_rank.push_back(s % ranks);
  return p;
}

Placement Placement::v(int ranks) {
  Placement p;
  p.kind = PlacementKind::V;
  p.ranks = ranks;
  for (int s = 0; s < 2 * ranks; ++s) p.stage_rank.push_back(s < ranks ? s : 2 * ranks - 1 - s);
  return p;
}

Placement detect_placement(const std::vector<std::vector<Action>>& ranks, const std::string& source) {
  int stages = 0;
  for (const auto& list : ranks)
    for (const Action& a : list) stages = std::max({stages, a.stage + 1, a.op == Op::FB ? a.stage2 + 1 : 0});
  if (stages == 0) throw_bad_input("{}: no actions; a schedule needs at least one row with actions", source);
  const int p = static_cast<int>(ranks.size());
  Placement placement;
  placement.kind = PlacementKind::Explicit;
  placement.ranks = p;
  placement.stage_rank.assign(static_cast<size_t>(stages), -1);
  for (int r = 0; r < p; ++r) {
    for (const Action& a : ranks[static_cast<size_t>(r)]) {
      for (const int stage : {a.stage, a.op == Op::FB ? a.stage2 : -1}) {
        // The first rank a stage shows up on is its home; the validator marks any other.
        if (stage >= 0 && placement.stage_rank[static_cast<size_t>(stage)] < 0 && is_compute(a.op))
          placement.stage_rank[static_cast<size_t>(stage)] = r;
      }
    }
  }
  for (int st = 0; st < stages; ++st) {
    if (placement.stage_rank[static_cast<size_t>(st)] < 0)
      throw_bad_input("{}: stage {} has no compute action on any rank; every stage from 0 to {} needs its F", source,
                      st, stages - 1);
  }
  if (stages % p == 0 && Placement::loop(p, stages / p).stage_rank == placement.stage_rank)
    return Placement::loop(p, stages / p);
  if (stages == 2 * p && Placement::v(p).stage_rank == placement.stage_rank) return Placement::v(p);
  return placement;
}


const char* to_string(PlacementKind kind) {
  switch (kind) {
    case PlacementKind::Loop: return "loop";
    case PlacementKind::V: return "v";
    case PlacementKind::Explicit: return "explicit";
  }
  return "?";
}

std::vector<WorkPart> parts_of(const Action& a) {
  switch (a.op) {
    case Op::F: return {{Part::F, a.stage, a.microbatch}};
    case Op::B: return {{Part::B, a.stage, a.microbatch}};
    case Op::W: return {{Part::W, a.stage, a.microbatch}};
    case Op::BW: return {{Part::B, a.stage, a.microbatch}, {Part::W, a.stage, a.microbatch}};
    case Op::FB:
      return {{Part::F, a.stage, a.microbatch}, {Part::B, a.stage2, a.microbatch2}, {Part::W, a.stage2, a.microbatch2}};
    default: return {};
  }
}

Action action_of(const WorkPart& part) {
  const Op op = part.part == Part::F ? Op::F : part.part == Part::B ? Op::B : Op::W;
  return Action{op, part.stage, part.microbatch};
}

bool has_composites(const Schedule& s) {
  for (const auto& list : s.ranks)
    for (const Action& a : list)
      if (a.op == Op::FB) return true;
  return false;
}

}  // namespace pw
