#pragma once
// The pipeline model on the discrete-event engine (sim/engine.hpp): each pipeline rank has a compute
// stream that runs its lowered action list in order, a send lane and a receive lane; transfers cross
// links whose bandwidth is shared by the transfers on them at once; compute slows by the cost model's
// transfer_compute_slowdown() while a transfer to or from its rank is in flight, and each send or receive
// first holds its rank for the cost model's transfer_post_s() (a runtime posting it); memory is allocated at
// F and freed at B/W by the stage's deltas. One synchronised iteration: pipeline flush, data-parallel gradient
// reduction per stage (starting when the stage's last weight gradient is done), optimizer step.
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/stage_costs.hpp"
#include "schedules/ir.hpp"

namespace pw {

enum class Lane { Compute, Send, Recv, Collective, Optimizer, AllToAll };
const char* to_string(Lane lane);

// One thing that took time in the simulated world. By lane:
//   Compute     one compute action, from its start to its end.
//   Send        one transfer, from its start on the rank's send lane until it arrives (its bytes cross
//               the link at a share of the bandwidth, then its latency passes).
//   Recv        one receive, from when the compute stream is at it and the transfer has started until
//               the stream can go on: the wait it causes (zero long when the data came first).
//   Collective  one stage's data-parallel gradient reduction: action op BW, stage = the reduced stage,
//               microbatch -1 (all of them); bytes: the stage's gradients (StageCost::grad_reduce_bytes).
//   Optimizer   the rank's optimizer step over all its stages, after the iteration's flush (synchronous) or its
//               own last action and reductions; action stage and microbatch -1 (optimizer_step_event).
//   AllToAll    the expert-parallel all-to-alls of one compute action (the same action), from its start for
//               as long as they take (StageCost::expert_comm_*: its MoE layers' dispatches and combines,
//               interleaved with their compute inside the action); in an F&B composite, both halves' at once,
//               as they run beside the other half's compute. Only for stages with routed experts.
struct SimEvent {
  int rank = 0;
  Lane lane = Lane::Compute;
  Action action;
  double start_s = 0;
  double end_s = 0;
  double bytes = 0;   // Send/Recv: the tensor's bytes; Collective: the gradient bytes reduced; 0 otherwise
  long flow_id = -1;  // links a send to its receive (same id on both)

  friend bool operator==(const SimEvent&, const SimEvent&) = default;
};

// A rank's optimizer step from start_s to end_s, as the simulator and the executor both report it.
inline SimEvent optimizer_step_event(int rank, double start_s, double end_s) {
  SimEvent e;
  e.rank = rank;
  e.lane = Lane::Optimizer;
  e.action = Action{Op::W, -1, -1};
  e.start_s = start_s;
  e.end_s = end_s;
  return e;
}

// Observers see every event as it completes and every change of memory in use.
class SimObserver {
 public:
  virtual ~SimObserver() = default;
  virtual void on_start(int ranks) {}
  virtual void on_event(const SimEvent& e) {}
  virtual void on_memory(int rank, double time_s, double bytes_in_use) {}
  virtual void on_finish(double step_time_s) {}
};

// Ranks that compute on the cores of one CPU machine, as pipewright's cpu backend runs them (a thread or a
// process per rank): with more ranks than cores they take turns on the cores, and a rank that slept waiting
// for a tensor runs again only after the OS wakes it. A GPU rank has a device of its own and never waits so.
struct SharedCores {
  // The cores the simulated ranks compute on, together; fractional when replicas the simulation leaves out
  // take the rest (2 cores, 3 replicas: 0.667). 0: every rank computes on a device of its own.
  double cores = 0;
  // From a tensor's arrival (or the flush's end) to its sleeping receiver running again on a free core (the
  // OS wakes it there); 0 when ranks spin. A receiver that finds every core taken waits for one instead.
  double wakeup_s = 0;
  // The ranks take turns on the cores as the executor's rank threads do (executor/core_turns.hpp): a rank
  // waiting for a tensor keeps its core (spinning) while no other rank waits for one, and hands it over when
  // one does; a core handed over to a waiting rank reaches it handover_s later. false: the OS shares the cores
  // (ranks as processes), a waiting rank's core freed at once and handed over at no cost.
  bool turns = false;
  double handover_s = 0;
};

struct SimInput {
  Schedule schedule;                 // compute-only or lowered; the simulator lowers when needed
  std::vector<StageCost> stages;     // indexed by stage
  std::vector<int> rank_gpu;         // pipeline rank -> global GPU index (for links); empty: rank r -> r
  Cluster cluster;
  const CostModel* cost = nullptr;   // p2p links and compute slowdown during transfers; null: links as given, none
  // true: every rank waits for the whole flush (the global gradient check) before its optimizer step.
  // false: each rank steps as soon as its own work and gradient reductions are done; with iterations
  // > 1 that many iterations run back to back, each rank starting the next one right after its own
  // step, as with zero-bubble's optimizer post-validation, and the result is the steady state (the
  // last iteration). With the synchronous step every iteration is alike and one is simulated.
  bool synchronous_optimizer = true;
  int iterations = 1;
  SharedCores shared_cores;
};

struct RankStats {
  int rank = 0;
  double busy_s = 0;                     // compute lane busy time
  double idle_s = 0;                     // step time - busy
  double activation_peak_bytes = 0;      // from the simulated alloc/free events
  double model_state_bytes = 0;          // sum over the rank's stages
  // The largest working set of the rank's stages (StageCost::working_bytes), counted on top of the
  // activation peak: the transient of the layer that runs when the most is held.
  double working_bytes = 0;
  double peak_memory_bytes = 0;          // model state + activation peak + working
  int peak_inflight_microbatches = 0;    // most micro-batches with activations held at once
  double p2p_bytes_sent = 0;
};

struct SimResult {
  double step_time_s = 0;      // with several iterations: the last one's, from the end of the one before
  double pipeline_time_s = 0;  // until the last compute action ends (several iterations: of the last one,
                               // from the end of the one before)
  int iterations = 1;          // simulated back to back; per-rank busy, idle and p2p bytes are per iteration
  std::vector<double> iteration_end_s;  // when the last rank finished each iteration's optimizer step
  double simulated_time_s = 0;          // the end of the last iteration: the span of the observed events
  // Seconds of the data-parallel reduction left after the last compute action (of the last iteration):
  // what overlapping it with the backward pass did not hide.
  double exposed_dp_comm_s = 0;
  double bubble_fraction = 0;  // idle compute time, less the exposed reduction, / (ranks x step time)
  std::vector<RankStats> ranks;
  long actions = 0;            // actions simulated (compute + comm)
};

// Throws BadInput when the stage costs do not match the schedule, the schedule is inconsistent (an action
// on the wrong rank, a send without its receive, a send before the tensor is computed) or deadlocks.
SimResult simulate(const SimInput& in, SimObserver* observer = nullptr);

}  // namespace pw
