#include "cli/failure_injection.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/error.hpp"

namespace pw {
namespace {

// "F, B, W of stage 1 for micro-batches 0..7": the compute the rank runs, in the IR's order of ops.
std::string compute_of(const std::vector<Action>& actions) {
  std::set<Op> ops;
  std::set<int> stages;
  int first_mb = -1, last_mb = -1;
  for (const Action& a : actions) {
    if (!is_compute(a.op)) continue;
    ops.insert(a.op);
    stages.insert(a.stage);
    first_mb = first_mb < 0 ? a.microbatch : std::min(first_mb, a.microbatch);
    last_mb = std::max(last_mb, a.microbatch);
  }
  std::string op_list, stage_list;
  for (Op op : ops) op_list += fmt::format("{}{}", op_list.empty() ? "" : ", ", to_string(op));
  for (int s : stages) stage_list += fmt::format("{}{}", stage_list.empty() ? "" : ", ", s);
  return fmt::format("{} of stage{} {} for micro-batches {}..{}", op_list, stages.size() == 1 ? "" : "s", stage_list,
                     first_mb, last_mb);
}

}  // namespace

InjectedFailure parse_injected_failure(const std::string& spec) {
  const size_t colon = spec.find(':');
  InjectedFailure f;
  f.rank = -1;
  try {
    size_t used = 0;
    if (colon != std::string::npos && colon > 0) f.rank = std::stoi(spec.substr(0, colon), &used);
    if (used != colon) f.rank = -1;
  } catch (const std::exception&) {
  }
  if (f.rank < 0) throw_bad_input("--inject-failure: '{}' is not RANK:ACTION such as 1:1F2", spec);
  std::string action_text = spec.substr(colon + 1);
  if (action_text.ends_with(":exit")) f.fault = InjectedFault::Exit;
  if (action_text.ends_with(":stall")) f.fault = InjectedFault::Stall;
  if (f.fault != InjectedFault::Throw) action_text.resize(action_text.rfind(':'));
  try {
    f.action = action_from_text(action_text);
  } catch (const Error& e) {
    throw_bad_input("--inject-failure: {}", e.what());
  }
  return f;
}

void check_injected_failure(const InjectedFailure& failure, const Schedule& schedule) {
  const int ranks = schedule.num_ranks();
  if (failure.rank >= ranks)
    throw_bad_input("--inject-failure: rank {} is not in the schedule, whose ranks are 0..{}; name one of them",
                    failure.rank, ranks - 1);
  const Schedule lowered = schedule.lowered ? schedule : lower(schedule);
  const std::vector<Action>& actions = lowered.ranks[static_cast<size_t>(failure.rank)];
  if (std::find(actions.begin(), actions.end(), failure.action) != actions.end()) return;
  const bool talks = std::any_of(actions.begin(), actions.end(), [](const Action& a) { return is_comm(a.op); });
  throw_bad_input("--inject-failure: rank {} never runs {}; it runs {}{}; name one of those", failure.rank,
                  to_text(failure.action), compute_of(actions), talks ? ", and their sends and receives" : "");
}

std::function<void(int, int, const Action&)> failure_hook(const std::string& spec, const Schedule& schedule) {
  if (spec.empty()) return {};
  const InjectedFailure f = parse_injected_failure(spec);
  check_injected_failure(f, schedule);
  return [f](int rank, int, const Action& a) {
    if (rank != f.rank || a != f.action) return;
    if (f.fault == InjectedFault::Exit) std::_Exit(9);
    if (f.fault == InjectedFault::Stall) std::this_thread::sleep_for(std::chrono::hours(24));
    throw std::runtime_error("injected failure (--inject-failure)");
  };
}

}  // namespace pw
