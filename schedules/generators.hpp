#pragma once
// Schedule generators: each produces the compute-only IR (lower() adds communication).
#include <string>
#include <vector>

#include "schedules/ir.hpp"

namespace pw {

// Error messages name the CLI flags: --schedule, --pp, --microbatches, --vpp,
// --group-size and --max-pending.
struct ScheduleSpec {
  std::string name;        // one of schedule_names()
  int ranks = 1;           // p
  int microbatches = 1;    // m
  int chunks = 1;          // v (interleaved, bfs; the V family takes 1 or 2 and runs 2; 1 for the others)
  int group_size = 0;      // interleaved micro-batch group size N (0: p; p <= N <= m; N = m is breadth-first)
  int max_pending = 0;     // zb-h1/zb-h2: most micro-batches whose W is pending on a rank, p..2p (0: the
                           // family's own: p for zb-h1, 2p for zb-h2)

  // zb-auto's inputs, all per stage (= per rank: zb-auto runs one stage per rank). Empty: uniform
  // F = B = W = 1 and free communication.
  std::vector<double> stage_f{}, stage_b{}, stage_w{};  // seconds per micro-batch
  std::vector<double> comm_s{};                   // per boundary s -> s + 1 (p - 1 values), each direction
  // Activation sets a stage may hold at once (an F allocates one; its B frees 1 - w_held, its W the
  // rest). Empty: p on every stage, which is what 1F1B needs on its first stage.
  std::vector<double> memory_limit_microbatches{};
  std::vector<double> stage_w_held{};  // fraction of a micro-batch's activations held until W (empty: 1)
};

// The families, all compute-only:
//   gpipe        all F, then all BW, on every rank.
//   1f1b         PipeDream-flush: min(p - r - 1, m) warm-up F on rank r, then F/BW pairs, then BW.
//   interleaved  Megatron's depth-first interleaved 1F1B; v >= 2 chunks per rank (stage c p + r),
//                m >= p and the last group of N full or at least p micro-batches (Megatron's rule).
//   bfs          looped breadth-first: interleaved with group size m (v >= 2, m >= p).
//   interleaved-overlap  interleaved with each steady-state F and the BW after it as one F&B composite:
//                Megatron-Core's --overlap-moe-expert-parallel-comm, which hides one micro-batch's
//                expert all-to-alls behind the other's compute.
//   zb-h1        zero-bubble H1: 1F1B with B and W split, at most p micro-batches pending W per rank.
//   zb-h2        zero-bubble H2: up to 2(p - r) - 1 warm-up F on rank r, W deferred into the bubbles.
//                zb-h1 and zb-h2 are one generator; max_pending in p..2p moves between them.
//   zb-v         PyTorch's ScheduleZBVZeroBubble: V placement (rank r holds stages r and 2p - 1 - r).
//   v-half       controllable-memory V schedule (Qi et al. 2024) at about half of 1F1B's activations.
//   v-min        the same at about a third.
//   dualpipe     DeepSeek's bidirectional DualPipe: two copies of the model on the V placement (rank r holds
//                part r of the first and part p - 1 - r of the second), half the micro-batches entering at
//                each end, with F&B composites; p and m even, m >= 2p.
//   dualpipev    DeepSeek's DualPipe folded into a V (PyTorch's ScheduleDualPipeV), with F&B composites;
//                m >= 2p.
//   zb-auto      the zero-bubble paper's heuristic search over the spec's stage times and memory
//                limits; never slower than 1F1B under the same limits (timed by timing.hpp).
std::vector<std::string> schedule_names();
// Checks the spec's constraints up front (throws BadInput naming the constraint and the fix),
// then builds the schedule.
Schedule make_schedule(const ScheduleSpec& spec);
// Number of model chunks per rank the named schedule uses for a given --vpp: --vpp for interleaved
// and bfs, 2 for the V family (which rejects a --vpp other than 1 or 2), 1 for the others.
int chunks_per_rank(const std::string& name, int vpp);
// Whether the named generator searches its order on the stage costs (zb-auto), so that every layer split
// needs its own order; BadInput for an unknown name.
bool order_from_costs(const std::string& name);
// Copies of the model the named schedule runs (Schedule::copies): 2 for dualpipe, whose stages are twice its
// model parts; 1 for the others. BadInput for an unknown name.
int model_copies(const std::string& name);
// schedule_names() of the schedules that run one copy of the model: what plan searches by default and PyTorch's CSV
// can say.
std::vector<std::string> one_copy_schedule_names();
// BadInput "OPTION: SUBJECT runs N copies of the model, WHY; INSTEAD dualpipev, its one-copy V form" where
// `copies` > 1: the refusal of whatever holds one copy of each stage (the partitioner, the executor, PyTorch's CSV).
void check_one_copy(const std::string& option, const std::string& subject, int copies, const std::string& why,
                    const std::string& instead);

}  // namespace pw
