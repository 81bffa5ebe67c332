#include "core/expert_parallel.hpp"

#include <algorithm>

#include "core/checked_math.hpp"
#include "core/error.hpp"
#include "core/special_values.hpp"

namespace pw {

void check_capacity_factor(double factor) {
  if (!(factor >= 0 && factor <= kMaxCapacityFactor && is_normal_or_zero(factor)))
    throw_bad_input("--capacity-factor: must be 0 (dropless) or a factor up to {:g} such as 1.25, got {:g}",
                    kMaxCapacityFactor, factor);
}

void check_expert_parallel(const Model& model, const ParallelConfig& pc, const Workload& w) {
  if (pc.ep < 1) throw_bad_input("--ep: must be at least 1, got {}", pc.ep);
  if (pc.etp < 1) throw_bad_input("--etp: must be at least 1, got {}", pc.etp);
  check_capacity_factor(w.capacity_factor);
  const bool moe = model.transformer && model.transformer->moe;
  if (!moe) {
    if (pc.ep > 1 || pc.etp > 1)
      throw_bad_input("--{}: model '{}' has no routed experts to spread; use --ep 1 --etp 1 or a mixture-of-experts model",
                      pc.ep > 1 ? "ep" : "etp", model.name);
    if (w.capacity_factor > 0)
      throw_bad_input("--capacity-factor: model '{}' has no routed experts; omit it", model.name);
    return;
  }
  const MoeConfig& m = *model.transformer->moe;
  if (m.experts % pc.ep != 0)
    throw_bad_input("--ep: {} does not divide the {} routed experts of '{}'; use a divisor of {}", pc.ep, m.experts,
                    model.name, m.experts);
  if (m.expert_ffn % pc.etp != 0)
    throw_bad_input("--etp: {} does not divide the experts' intermediate size {} of '{}'; use a divisor of {}", pc.etp,
                    m.expert_ffn, model.name, m.expert_ffn);
  const long folded = static_cast<long>(pc.tp) * pc.cp * pc.dp;
  if (folded % (static_cast<long>(pc.ep) * pc.etp) != 0)
    throw_bad_input("--ep: ep x etp = {} x {} does not divide the tp x cp x dp = {} GPUs of a stage that the experts "
                    "fold into; use an ep x etp that divides {}",
                    pc.ep, pc.etp, folded, folded);
  if (pc.tp > 1 && !w.sequence_parallel)
    throw_bad_input("--no-sequence-parallel: Megatron-Core's MoE layers need sequence parallelism with --tp {}; drop "
                    "--no-sequence-parallel or use --tp 1",
                    pc.tp);
}

namespace {

// The GPU at folded index f past `first_gpu`: inside the tp x cp block, then from replica to replica.
int folded_rank(const ParallelConfig& pc, int first_gpu, long f) {
  const long block = static_cast<long>(pc.tp) * pc.cp;
  return static_cast<int>(first_gpu + f % block + f / block * dp_stride(pc));
}

}  // namespace

std::vector<int> folded_group(const ParallelConfig& pc, int first_gpu, int first, int stride, int n) {
  std::vector<int> out;
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out.push_back(folded_rank(pc, first_gpu, first + static_cast<long>(i) * stride));
  return out;
}

std::vector<int> ep_group(const ParallelConfig& pc, int first_gpu) { return folded_group(pc, first_gpu, 0, pc.etp, pc.ep); }

std::vector<int> expert_dp_group(const ParallelConfig& pc, int first_gpu) {
  return folded_group(pc, first_gpu, 0, pc.etp * pc.ep, pc.expert_dp());
}

int ep_group_nodes(const Cluster& cluster, const ParallelConfig& pc) {
  if (cluster.ideal) return 1;
  std::vector<int> nodes;
  for (int g : ep_group(pc, 0)) nodes.push_back(cluster.node_of(g));
  std::sort(nodes.begin(), nodes.end());
  return static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
}

LinkSpec folded_ring_link(const Cluster& cluster, const ParallelConfig& pc, int first_gpu, int stride, int n) {
  if (cluster.ideal || n <= 1) return LinkSpec{kInf, 0};
  // The members' places in their nodes repeat within a few nodes' worth of hops (past a measured link
  // matrix): the first hops and the closing one show every kind of link a huge ring has.
  const int measured = cluster.measured ? cluster.measured->gpus : 0;
  const int hops = std::min(n, measured + 2 * cluster.gpus_per_node + 2);
  LinkSpec out{kInf, 0}, inside{kInf, 0};
  const auto hop = [&](const LinkSpec& l) {
    out = slower(out, l);
    if (!l.inter_node) inside = slower(inside, l);
  };
  for (int i = 0; i < hops; ++i)
    hop(cluster.link(folded_rank(pc, first_gpu, static_cast<long>(i) * stride),
                     folded_rank(pc, first_gpu, static_cast<long>((i + 1) % n) * stride)));
  hop(cluster.link(folded_rank(pc, first_gpu, static_cast<long>(n - 1) * stride), first_gpu));
  if (cluster.measured || !out.inter_node) return out;
  return with_rails(out, inside, fewest_members_per_node(cluster, n, [&](int i) {
                      return static_cast<long>(folded_rank(pc, first_gpu, static_cast<long>(i) * stride));
                    }));
}

AllToAllLinks all_to_all_links(const Cluster& cluster, const ParallelConfig& pc, int first_gpu) {
  AllToAllLinks out;
  out.ranks = pc.ep;
  out.etp = pc.etp;
  out.in_node_link = out.across_link = out.etp_link = LinkSpec{kInf, 0};
  if (cluster.ideal) return out;
  out.gpu = cluster.gpu_at(first_gpu);
  const std::vector<int> group = ep_group(pc, first_gpu);
  const int me = group.front();
  for (size_t i = 1; i < group.size(); ++i) {
    const LinkSpec l = cluster.link(me, group[i]);
    if (cluster.node_of(group[i]) == cluster.node_of(me)) {
      ++out.in_node;
      out.in_node_link = slower(out.in_node_link, l);
    } else {
      ++out.across;
      out.across_link = slower(out.across_link, l);
    }
  }
  out.etp_link = folded_ring_link(cluster, pc, first_gpu, 1, pc.etp);
  return out;
}

}  // namespace pw
