#include "cli/run_processes.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <thread>

#include "core/error.hpp"

namespace pw {
namespace {

// A process that stays quiet about an error waits for the one reporting it to end the job (so that the
// report is out before the launcher tears this process down), but not forever.
[[noreturn]] void leave_quietly(int code) {
  std::this_thread::sleep_for(std::chrono::seconds(10));
  end_job_now(code);
}

// The line goes out in one write, and the launcher gets a moment to pass it on: its own banner about the
// abort travels another way and would otherwise cut into the line or come first.
[[noreturn]] void report_and_end(const std::string& message, int code) {
  const std::string line = "error: " + message + "\n";
  std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
  std::cerr.flush();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  end_job_now(code);
}

}  // namespace

void LaunchedRun::check_ranks(int ranks, int replicas) const {
  if (replicas == 1 && ranks != env_.world_size)
    throw_bad_input("--pp: the pipeline has {} ranks but {} started {} processes; start {} {} or run --pp {}", ranks,
                    env_.launcher, env_.world_size, world_size_flag(env_), ranks, env_.world_size);
  if (ranks * replicas != env_.world_size)
    throw_bad_input("--dp: {} replicas of a pipeline of {} ranks take {} processes but {} started {}; start {} {}",
                    replicas, ranks, ranks * replicas, env_.launcher, env_.world_size, world_size_flag(env_),
                    ranks * replicas);
}

RunResult LaunchedRun::run(const Schedule& schedule, Backend& backend, const RunOptions& options) {
  check_ranks(schedule.num_ranks(), options.replicas);
  return run_schedule(schedule, backend, options, group_);
}

RunResult LaunchedRun::run(const Schedule& schedule, Backend& backend, const RunOptions& options, Transport& transport,
                           const std::vector<int>& local_ranks) {
  return run_schedule(schedule, backend, options, group_, transport, local_ranks);
}

std::vector<double> LaunchedRun::losses(const std::vector<double>& local) {
  std::vector<std::byte> mine(local.size() * sizeof(double));
  if (!local.empty()) std::memcpy(mine.data(), local.data(), mine.size());
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s_));
  std::vector<std::vector<std::byte>> all;
  try {
    all = group_.gather(std::move(mine), deadline);
  } catch (const PeerFailed& e) {
    throw RunFailedElsewhere(e.message);
  } catch (const RecvTimeout&) {
    throw_runtime("rank {} failed at the gathering of the losses: they did not arrive within {:g} s", group_.rank(),
                  timeout_s_);
  } catch (const PeerLost& e) {
    throw_runtime("rank {} failed: its process ({}) ended while rank {} waited at the gathering of the losses", e.rank,
                  e.process, group_.rank());
  }
  if (!reports()) return local;
  // The last stage holds the loss: the processes holding it (one per data-parallel replica) have their
  // replica's losses, the others none; the run's are the mean over the replicas, added in process order.
  std::vector<double> sum;
  int holders = 0;
  for (const std::vector<std::byte>& bytes : all) {
    if (bytes.empty()) continue;
    std::vector<double> one(bytes.size() / sizeof(double));
    std::memcpy(one.data(), bytes.data(), one.size() * sizeof(double));
    if (sum.empty()) sum.assign(one.size(), 0.0);
    if (one.size() != sum.size())
      throw_runtime("the gathering of the losses: one process has {} iterations' losses, another {}", one.size(), sum.size());
    for (size_t i = 0; i < one.size(); ++i) sum[i] += one[i];
    ++holders;
  }
  for (double& v : sum) v /= holders;
  return sum;
}

void run_launched(const LaunchEnv& env, double timeout_s, std::ostream& out,
                  const std::function<void(LaunchedRun&)>& body) {
  const bool first = env.rank == 0;
  try {
    const std::unique_ptr<ProcessGroup> group = join_launched_processes(env, timeout_s > 0 ? timeout_s : 60);
    try {
      LaunchedRun run(env, *group, timeout_s);
      body(run);
      out.flush();
    } catch (const RunFailedElsewhere& e) {
      // The failing process reports and ends the job itself, which ends this one at once. One that announced
      // a failure and never ended the job (a process of the job gone wrong, or one that died just after)
      // is reported by process 0, naming it.
      if (!first) leave_quietly(1);
      std::this_thread::sleep_for(std::chrono::seconds(10));
      const std::string origin = group->failure_origin();
      report_and_end(fmt::format("{} (announced by {}, which did not end the job within 10 s)", e.what(),
                                 origin.empty() ? "another process" : origin),
                     1);
    } catch (const ErrorOfEveryProcess& e) {
      if (!first) std::this_thread::sleep_for(std::chrono::seconds(10));
      report_and_end(e.what(), 1);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::BadInput && !first) leave_quietly(2);
      report_and_end(e.what(), exit_code(e.kind()));
    } catch (const std::exception& e) {
      report_and_end(e.what(), 1);
    }
  } catch (const Error& e) {
    // Joining failed: the same for every process when it is bad input.
    if (e.kind() == ErrorKind::BadInput && !first) leave_quietly(2);
    report_and_end(e.what(), exit_code(e.kind()));
  } catch (const std::exception& e) {
    report_and_end(e.what(), 1);
  }
}

}  // namespace pw
