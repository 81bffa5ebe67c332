#include "schedules/pytorch_csv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "core/error.hpp"
#include "core/excerpt.hpp"
#include "core/file_caps.hpp"
#include "schedules/generators.hpp"
#include "schedules/validate.hpp"

namespace pw {

namespace {

const char* pytorch_op(Op op) {
  switch (op) {
    case Op::F: return "F";
    case Op::B: return "I";
    case Op::W: return "W";
    case Op::BW: return "B";
    default: return to_string(op);  // SEND_F, RECV_F, SEND_B, RECV_B
  }
}

std::string pytorch_text(const Action& a) {
  if (a.op == Op::FB) return fmt::format("({}F{};{}B{})OVERLAP_F_B", a.stage, a.microbatch, a.stage2, a.microbatch2);
  return fmt::format("{}{}{}", a.stage, pytorch_op(a.op), a.microbatch);
}

// One CSV line split into cells as Python's csv reader does for this format: commas separate, a
// cell may be double-quoted with "" for a quote inside.
std::vector<std::string> split_cells(const std::string& line, const std::string& where) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cells.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cells.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  if (quoted) throw_bad_input("{}: a quoted cell is not closed; close it with \"", where);
  return cells;
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

bool parse_int(const std::string& digits, int& value) {
  if (digits.empty() || digits.size() > 9) return false;
  value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    value = value * 10 + (c - '0');
  }
  return true;
}

[[noreturn]] void bad_cell(const std::string& where, const std::string& text) {
  throw_bad_input(
      "{}: '{}' is not a PyTorch action; expected <stage><op><micro-batch> with op F, I, W, B, SEND_F, RECV_F, "
      "SEND_B, RECV_B, WAIT_SEND_F or WAIT_SEND_B (such as 2F0, 0I3, 3SEND_F1), <stage><op> with op UNSHARD, "
      "RESHARD, REDUCE_GRAD or WAIT_REDUCE_GRAD, or (<action>;<action>)OVERLAP_F_B",
      where, excerpt(text));
}

// Stage and micro-batch indices are bounded before anything is sized by them (the placement has one
// entry per stage up to the largest index; the validator's tables one per part).
void check_indices(const std::string& where, const std::string& text, int stage, int mb) {
  if (stage >= kMaxScheduleStages)
    throw_bad_input("{}: '{}' names stage {}, above the cap of {} stages; number stages from 0", where, excerpt(text),
                    stage, kMaxScheduleStages);
  if (mb >= kMaxScheduleMicrobatches)
    throw_bad_input("{}: '{}' names micro-batch {}, above the cap of {} micro-batches; number micro-batches from 0",
                    where, excerpt(text), mb, kMaxScheduleMicrobatches);
}

// A simple action; nothing for the skipped FSDP and gradient-reduction actions.
std::optional<Action> parse_simple(const std::string& text, const std::string& where) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  size_t j = i;
  while (j < text.size() && (std::isupper(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
  const std::string op = text.substr(i, j - i);
  int stage = 0;
  if (!parse_int(text.substr(0, i), stage)) bad_cell(where, text);
  if ((op == "UNSHARD" || op == "RESHARD" || op == "REDUCE_GRAD" || op == "WAIT_REDUCE_GRAD") && j == text.size())
    return std::nullopt;
  int mb = 0;
  if (!parse_int(text.substr(j), mb)) bad_cell(where, text);
  check_indices(where, text, stage, mb);
  // A send's completion (torch 2.15 _Action.from_str: "<stage>WAIT_SEND_F<mb>"): the simulator and the
  // executor end a send when its transfer arrives, so the wait carries nothing for them.
  if (op == "WAIT_SEND_F" || op == "WAIT_SEND_B") return std::nullopt;
  static constexpr Op kOps[] = {Op::F, Op::B, Op::W, Op::BW, Op::SendF, Op::RecvF, Op::SendB, Op::RecvB};
  for (const Op candidate : kOps)
    if (op == pytorch_op(candidate)) return Action{candidate, stage, mb};
  bad_cell(where, text);
}

// A cell's actions. PyTorch's runtime (torch/distributed/pipelining/runtime.py, _PipelineScheduleRuntime at
// 1f1416a3) runs a composite's sub-actions one after another in the order listed, unless an overlap
// function is registered for it. A forward then a full backward, (xFm;yBn)OVERLAP_F_B as ScheduleDualPipeV
// writes it, is pipewright's F&B composite (forward first, then the full backward); any other composite of
// compute actions (a backward first, an input-gradient I half, more than two) is read as its sub-actions
// in order, which is how PyTorch runs it.
std::vector<Action> parse_cell(const std::string& text, const std::string& where) {
  const std::string suffix = ")OVERLAP_F_B";
  if (text.empty() || text.front() != '(') {
    const auto a = parse_simple(text, where);
    return a ? std::vector<Action>{*a} : std::vector<Action>{};
  }
  if (text.size() <= suffix.size() + 1 || text.compare(text.size() - suffix.size(), suffix.size(), suffix) != 0)
    bad_cell(where, text);
  const std::string inner = text.substr(1, text.size() - suffix.size() - 1);
  std::vector<Action> halves;
  for (size_t from = 0; from <= inner.size();) {
    const size_t semicolon = std::min(inner.find(';', from), inner.size());
    const auto a = parse_simple(trim(inner.substr(from, semicolon - from)), where);
    if (!a || !is_compute(a->op))
      throw_bad_input("{}: '{}': the actions of an OVERLAP_F_B composite are computations (F, I, B, W), such as "
                      "(0F1;1B0)OVERLAP_F_B",
                      where, excerpt(text));
    halves.push_back(*a);
    from = semicolon + 1;
  }
  if (halves.size() == 2 && halves[0].op == Op::F && halves[1].op == Op::BW)
    return {Action{Op::FB, halves[0].stage, halves[0].microbatch, halves[1].stage, halves[1].microbatch}};
  return halves;
}

// A lowered rank's cells as torch 2.15's own lowering (_PipelineScheduleRuntime._prepare_schedule_with_comms,
// format "compute_only") would write them for the same action list, so that its compute_comms loader takes
// them (_validate_send_waits) and its runtime scales the gradients (only REDUCE_GRAD does, and a loaded
// compute_comms file gets none added):
//  - _add_reduce_grad (defer_reduce_grad_wait off): after the action holding a stage's last weight
//    gradient (its n-th W or full backward, an F&B's backward half included), "<stage>REDUCE_GRAD" then
//    "<stage>WAIT_REDUCE_GRAD". That pass runs before _add_send_recv, which puts an action's own sends
//    right after it, so they come after those sends.
//  - _add_wait_send: "<stage>WAIT_SEND_F<mb>" right after the local backward (I, B, or an F&B's backward
//    half) of the stage and micro-batch whose SEND_F came earlier on the rank, before that backward's own
//    SEND_B; every other send's wait (backward sends, forward sends without a local backward) at the end
//    of the row, in the order of the sends.
std::vector<std::string> comms_cells(const std::vector<Action>& list, int microbatches) {
  struct Pending {
    Op op;
    int stage, mb;
  };
  std::vector<Pending> pending;  // sends not waited for yet, in order
  std::vector<int> weight_grads;  // per stage
  std::vector<std::string> cells;
  std::vector<int> reduce_after_sends;  // stages whose reduction follows the current action's sends
  auto flush_reductions = [&] {
    for (int stage : reduce_after_sends) {
      cells.push_back(fmt::format("{}REDUCE_GRAD", stage));
      cells.push_back(fmt::format("{}WAIT_REDUCE_GRAD", stage));
    }
    reduce_after_sends.clear();
  };
  for (const Action& a : list) {
    const bool send = a.op == Op::SendF || a.op == Op::SendB;
    if (!send) flush_reductions();
    cells.push_back(pytorch_text(a));
    if (send) {
      pending.push_back({a.op, a.stage, a.microbatch});
      continue;
    }
    int bw_stage = -1, bw_mb = -1;  // the backward half, if any
    int wg_stage = -1;              // the stage whose weight gradient this action computes, if any
    if (a.op == Op::B || a.op == Op::BW) bw_stage = a.stage, bw_mb = a.microbatch;
    if (a.op == Op::FB) bw_stage = a.stage2, bw_mb = a.microbatch2;
    if (a.op == Op::W || a.op == Op::BW) wg_stage = a.stage;
    if (a.op == Op::FB) wg_stage = a.stage2;
    if (bw_stage >= 0) {
      const auto it = std::find_if(pending.begin(), pending.end(), [&](const Pending& p) {
        return p.op == Op::SendF && p.stage == bw_stage && p.mb == bw_mb;
      });
      if (it != pending.end()) {
        cells.push_back(fmt::format("{}WAIT_SEND_F{}", bw_stage, bw_mb));
        pending.erase(it);
      }
    }
    if (wg_stage >= 0) {
      if (weight_grads.size() <= static_cast<size_t>(wg_stage)) weight_grads.resize(static_cast<size_t>(wg_stage) + 1);
      if (++weight_grads[static_cast<size_t>(wg_stage)] == microbatches) reduce_after_sends.push_back(wg_stage);
    }
  }
  flush_reductions();
  for (const Pending& p : pending)
    cells.push_back(fmt::format("{}{}{}", p.stage, p.op == Op::SendF ? "WAIT_SEND_F" : "WAIT_SEND_B", p.mb));
  return cells;
}

}  // namespace

void check_pytorch_csv_copies(const std::string& name, int copies) {
  check_one_copy("--export-csv", "schedule " + name, copies,
                 "half the micro-batches each, and PyTorch's pipelining sends every micro-batch through every stage",
                 "export");
}

std::string schedule_to_pytorch_csv(const Schedule& s) {
  check_pytorch_csv_copies(s.name, s.copies);
  std::string out;
  for (const auto& list : s.ranks) {
    std::vector<std::string> cells;
    if (s.lowered) {
      cells = comms_cells(list, s.microbatches);
    } else {
      for (const Action& a : list) cells.push_back(pytorch_text(a));
    }
    for (size_t k = 0; k < cells.size(); ++k) {
      if (k > 0) out += ',';
      out += cells[k];
    }
    out += "\r\n";
  }
  return out;
}

Schedule schedule_from_pytorch_csv(const std::string& text, const std::string& source, int microbatches) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  if (lines.empty()) throw_bad_input("{}: empty; a PyTorch schedule CSV has one row of actions per rank", source);
  if (lines.size() > static_cast<size_t>(kMaxScheduleRanks))
    throw_bad_input("{}: {} rows, above the cap of {} ranks; give one row per rank", source, lines.size(),
                    kMaxScheduleRanks);

  Schedule s;
  s.name = source;
  int largest_mb = -1;
  long actions = 0;
  std::string empty_cell;  // the first, where PyTorch's compute_comms format has none
  for (size_t r = 0; r < lines.size(); ++r) {
    const std::string row_name = fmt::format("{}: row {}", source, r + 1);
    const std::vector<std::string> cells = split_cells(lines[r], row_name);
    std::vector<Action> list;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string cell = trim(cells[c]);
      if (cell.empty()) {  // an idle step
        if (empty_cell.empty()) empty_cell = fmt::format("{}, cell {}", row_name, c + 1);
        continue;
      }
      for (const Action& a : parse_cell(cell, fmt::format("{}, cell {}", row_name, c + 1))) {
        if (++actions > kMaxScheduleActions)
          throw_bad_input("{}: more than {} actions, the cap for a schedule file; give a schedule with fewer", row_name,
                          kMaxScheduleActions);
        if (is_comm(a.op)) s.lowered = true;
        largest_mb = std::max({largest_mb, a.microbatch, a.op == Op::FB ? a.microbatch2 : -1});
        list.push_back(a);
      }
    }
    s.ranks.push_back(std::move(list));
  }
  // _load_csv (runtime.py) reads a compute_comms file's cells as actions, each of them; an idle step is
  // a compute_only file's.
  if (s.lowered && !empty_cell.empty())
    throw_bad_input("{}: an empty cell in a file with sends and receives; PyTorch's compute_comms format has an "
                    "action in every cell (only compute_only files mark idle steps), so remove it",
                    empty_cell);
  s.placement = detect_placement(s.ranks, source);
  if (microbatches < 0) throw_bad_input("{}: micro-batches must be positive, got {}", source, microbatches);
  s.microbatches = microbatches > 0 ? microbatches : largest_mb + 1;
  validate(s);
  return s;
}

}  // namespace pw
