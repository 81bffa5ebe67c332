#include "cli/failure_options.hpp"

#include <fmt/format.h>

#include <cctype>
#include <limits>

#include "cli/percentage_option.hpp"
#include "core/error.hpp"
#include "planner/recovery_ways.hpp"

namespace pw {

void FailureOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--fail", fail,
                 "Also plan for this much of the run failing: GPUs (8 or 8gpus) or nodes (1node, 2nodes); the ways on "
                 "(drop replicas, re-split, re-plan) ranked by tokens/s");
  add_batch_tolerance_option(cmd, batch_tolerance);
}

void add_batch_tolerance_option(CLI::App& cmd, std::string& text) {
  cmd.add_option("--batch-tolerance", text,
                 fmt::format("After a failure, how far dropping data-parallel replicas may move the global batch, e.g. "
                             "5% (default {:g}%)",
                             kDefaultBatchTolerance * 100));
}

double batch_tolerance_of(const std::string& text) {
  if (text.empty()) return kDefaultBatchTolerance;
  return percentage_option(text, "--batch-tolerance", "the global batch", kMaxBatchTolerance);
}

LostGpus lost_gpus(const std::string& fail, int gpus, const Cluster& cluster) {
  size_t digits = 0;
  while (digits < fail.size() && std::isdigit(static_cast<unsigned char>(fail[digits]))) ++digits;
  const std::string unit = fail.substr(digits);
  const bool nodes = unit == "node" || unit == "nodes";
  if (digits == 0 || digits > 9 || !(unit.empty() || unit == "gpu" || unit == "gpus" || nodes))
    throw_bad_input("--fail: '{}' is not a count of GPUs or nodes; give e.g. 8, 8gpus or 1node", fail);
  const long count = std::stol(fail.substr(0, digits));
  if (count < 1) throw_bad_input("--fail: '{}' loses nothing; give at least 1 GPU or node", fail);
  const int per = cluster.ideal ? 1 : cluster.gpus_per_node;
  if (nodes && cluster.ideal)
    throw_bad_input("--fail: cluster '{}' is ideal and has no nodes; give a count of GPUs", cluster.name);
  const long lost = nodes ? count * per : count;
  const long have = cluster.nodes > 0 ? static_cast<long>(cluster.nodes) * per : gpus;
  if (lost > have)
    throw_bad_input("--fail: {} {} is more than cluster '{}' has ({} GPUs); fail fewer", count, nodes ? "nodes" : "GPUs",
                    cluster.name, have);
  if (lost >= gpus)
    throw_bad_input("--fail: {} {} ({} GPUs) leaves none of the plan's {} GPUs; fail fewer", count,
                    nodes ? (count == 1 ? "node" : "nodes") : (count == 1 ? "GPU" : "GPUs"), lost, gpus);
  LostGpus out;
  out.gpus = static_cast<int>(lost);
  out.nodes = nodes ? static_cast<int>(count) : 0;
  out.left = gpus - out.gpus;
  out.what = nodes ? fmt::format("{} node{} ({} GPUs)", count, count == 1 ? "" : "s", lost)
                   : fmt::format("{} GPU{}", count, count == 1 ? "" : "s");
  return out;
}

}  // namespace pw
