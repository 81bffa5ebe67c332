#pragma once
// The arithmetic of NCCL measurements, as nccl-tests defines it, and the groups a plan's collectives run
// over. Plain C++: the CUDA profiler times, this turns times into the numbers people compare.
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "profiler/profile.hpp"

namespace pw {

enum class CollectiveOp { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, SendRecv };
// nccl-tests' names: "all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv".
const char* to_string(CollectiveOp op);

// busbw / algbw: 2 (n - 1) / n for all-reduce; (n - 1) / n for all-gather, reduce-scatter and all-to-all;
// 1 for broadcast, reduce and send/receive. BadInput for n < 1.
double bus_factor(CollectiveOp op, int ranks);

// One measurement in nccl-tests' terms. `bytes` is the size nccl-tests prints: the whole array over all
// ranks for all-gather and reduce-scatter, the buffer for the others.
struct BandwidthSample {
  CollectiveOp op = CollectiveOp::AllReduce;
  int ranks = 1;
  double bytes = 0;
  double time_s = 0;
  double algbw_gb_s = 0;  // bytes / 1e9 / time (decimal GB/s)
  double busbw_gb_s = 0;  // algbw x bus_factor
};
BandwidthSample bandwidth_sample(CollectiveOp op, int ranks, double bytes, double time_s);

// The element count each rank passes to NCCL for `bytes` of `element_bytes`-sized elements: the whole count
// for all-reduce, broadcast, reduce and send/receive; a rank's share (count / ranks) for all-gather's send,
// reduce-scatter's receive and all-to-all's per-peer block.
long nccl_count(CollectiveOp op, double bytes, int ranks, int element_bytes);
// `bytes` rounded down to a whole number of elements on every rank (at least one), so that the measured size
// is exactly what is reported.
double round_to_ranks(CollectiveOp op, double bytes, int ranks, int element_bytes);

// begin, begin x factor, ... up to end (nccl-tests' -b -e -f). BadInput naming --min-bytes, --max-bytes or
// the factor when begin < 1, end < begin or factor <= 1.
std::vector<double> geometric_sizes(double begin, double end, double factor);

// Megatron's rank order with tp fastest, then dp, then pp: rank = (p * dp + d) * tp + t. The groups of
// ranks that run the tensor-parallel collectives (same p, d) and the data-parallel ones (same p, t).
// BadInput when a size is below 1.
std::vector<std::vector<int>> tp_groups(int tp, int dp, int pp);
std::vector<std::vector<int>> dp_groups(int tp, int dp, int pp);

// The measured matrix of a cluster file from fitted rank-to-rank links: entry (a, b) from the link a -> b,
// or b -> a when only that direction was measured; a GPU's link to itself is 0 bandwidth and 0 latency.
// BadInput naming the first pair with no link either way.
LinkMatrix link_matrix(const std::vector<LinkProfile>& links, int gpus);

// The link a ring over `gpus` is bound by: the lowest bandwidth and the highest latency of the measured links
// between any two of them (either direction). BadInput naming the first pair with no link either way.
LinkSpec group_link(const std::vector<int>& gpus, const std::vector<LinkProfile>& links);

// A measurement as the profile keeps it (profile.json's "collectives", which calibrate fits): all-reduce,
// all-gather and reduce-scatter only (BadInput for the others, which no cost model asks about).
CollectiveProfile collective_profile(const BandwidthSample& sample, const LinkSpec& group_link);

// How much slower a GEMM ran with NCCL traffic beside it: with / alone - 1 (0.12 = 12% slower).
double overlap_slowdown(double alone_s, double with_traffic_s);

// nccl-tests' table: "size  count  type  redop  time  algbw  busbw" rows (time in us, bandwidths in GB/s),
// one header line naming the op and the ranks.
std::string nccl_tests_table(const std::vector<BandwidthSample>& samples, const std::string& type, int element_bytes,
                             const std::string& group);

}  // namespace pw
