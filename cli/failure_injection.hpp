#pragma once
// `run --inject-failure RANK:ACTION[:exit|:stall]`, a test hook: at that action of that rank (every
// iteration) the rank throws as a failing kernel would; with `:exit` its whole process ends without a word,
// as a crash would; with `:stall` the rank hangs there, as a deadlocked kernel would.
#include <functional>
#include <string>

#include "schedules/ir.hpp"

namespace pw {

enum class InjectedFault { Throw, Exit, Stall };

struct InjectedFailure {
  int rank = 0;
  Action action;
  InjectedFault fault = InjectedFault::Throw;
};

// BadInput "--inject-failure: ..." for text that is not RANK:ACTION[:exit|:stall].
InjectedFailure parse_injected_failure(const std::string& spec);

// BadInput naming the schedule's ranks when the rank is not one of them, or what the rank runs when the
// action is not one of its actions ("rank 1 runs F, B, W of stage 1 for micro-batches 0..7, and their sends
// and receives"). `schedule` as given; its lowered form is what the ranks run.
void check_injected_failure(const InjectedFailure& failure, const Schedule& schedule);

// The hook for RunOptions::before_action; empty for an empty spec.
std::function<void(int rank, int iteration, const Action& action)> failure_hook(const std::string& spec,
                                                                              const Schedule& schedule);

}  // namespace pw
