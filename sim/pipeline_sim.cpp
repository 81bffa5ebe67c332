#include "sim/pipeline_sim.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <utility>

#include "core/error.hpp"
#include "core/overlapped_pair.hpp"
#include "sim/engine.hpp"

namespace pw {

const char* to_string(Lane lane) {
  switch (lane) {
    case Lane::Compute: return "compute";
    case Lane::Send: return "send";
    case Lane::Recv: return "recv";
    case Lane::Collective: return "collective";
    case Lane::Optimizer: return "optimizer";
    case Lane::AllToAll: return "all-to-all";
  }
  return "?";
}

namespace {

enum EventKind : std::uint32_t {
  kComputeDone = 0,
  kFlow = 1,
  kCollectiveDone = 2,
  kOptimizerDone = 3,
  kBucketReady = 4,
  kWoken = 5,
  kPostDone = 6,  // a rank's thread done posting a send or receive (CostModel::transfer_post_s)
};

// One piece of a stage's data-parallel reduction on its rank's collective lane: a gradient bucket, the
// last one carrying the parameter all-gather of the distributed optimizer. Only the last piece of a stage
// counts as its reduction done.
struct ReductionPiece {
  int rank = 0;
  int stage = 0;
  double duration = 0;
  double bytes = 0;
  bool last = false;
};
constexpr std::uint32_t kNone = 0xffffffffu;

// What a compute action costs and does to memory: one per (stage, op), plus one per composite step.
struct ComputeCost {
  double duration = 0;
  double alloc = 0;              // bytes allocated when the action starts
  double release = 0;            // bytes freed when it ends
  std::int32_t grad_stage = -1;  // stage whose weight gradient gains one micro-batch at the end
  std::int8_t held_start = 0;    // +1: a (stage, micro-batch) activation starts being held
  std::int8_t held_end = 0;      // -1: one is fully released
  bool allocates = false;
  bool frees = false;
};
constexpr int kOpsPerStage = 4;  // F, B, W, BW: ComputeCost index stage * 4 + op

constexpr std::uint32_t kSendStep = 0xfffffffeu;
constexpr std::uint32_t kRecvStep = 0xfffffffdu;
enum class StepKind : std::uint8_t { Compute, Send, Recv };

// One entry of a rank's lowered list: 8 bytes, so that the hot loop streams through one array (a second
// per-step array of inputs beside it cost a cache miss per compute step: the simulator ran at 1.65x its
// longest-path floor instead of 1.2x).
// Left uninitialised (set up writes each once: 12 MB for the largest benchmark).
struct Step {
  std::uint32_t index;  // Compute: into the compute costs; Send/Recv: the transfer id
  // Compute: the transfer that brings its input from another rank, kNone when none does (an F&B's
  // second input is in the composite's entry); kSendStep or kRecvStep for the others.
  std::uint32_t input;
  StepKind kind() const {
    return input == kSendStep ? StepKind::Send : input == kRecvStep ? StepKind::Recv : StepKind::Compute;
  }
};
static_assert(sizeof(Step) == 8);

// A stage boundary in one direction: the tensor that crosses it, and the ranks and link it crosses.
// Transfers are numbered by the sender's (stage, micro-batch), forward ones first, so that a receive
// finds its send without a search and the per-transfer state is one byte.
struct Boundary {
  double bytes = 0;
  std::int32_t src = -1;
  std::int32_t dst = -1;
  std::int32_t link = -1;
};
enum TransferFlag : std::uint8_t { kSent = 1, kReceived = 2, kArrived = 4, kPosted = 8 };

struct RankState {
  const Step* steps = nullptr;
  std::uint32_t pc = 0;
  std::uint32_t size = 0;
  // The transfer the compute action at pc waits for (kNone: not waiting). A receive is posted where it
  // stands in the list and waited for by the action that consumes it, as PyTorch's pipelining runtime
  // does; with receives right before their consumers (lower()) that is the same as waiting at the receive.
  std::uint32_t waiting_for = kNone;
  double compute_start = 0;
  const ComputeCost* cost = nullptr;  // of the compute in progress (its step's line may be cold by its end)
  // The compute in progress when transfers slow it (transfer_compute_slowdown > 0): the seconds of it left
  // at full speed as of segment_start, its current speed, and the version of its completion event.
  double compute_left = 0;
  double segment_start = 0;
  double compute_speed = 1;
  std::uint32_t compute_version = 0;
  bool computing = false;
  int transfers_in_flight = 0;  // to or from this rank
  double collective_start = 0;
  double optimizer_start = 0;
  double send_start = 0;  // of the transfer on the send lane (one at a time)
  double bytes = 0;
  double peak_bytes = 0;
  int held = 0;
  int peak_held = 0;
  double busy = 0;
  double last_compute_end = 0;
  double collective_end = 0;
  double p2p_sent = 0;
  FifoLane send;
  FifoLane collective;
  // Several iterations back to back: the next iteration starts after the rank's own optimizer step,
  // which waits for the rank's gradient reductions of the iteration before.
  std::uint32_t iteration_length = 0;  // steps per iteration
  int iterations_passed = 0;           // optimizer steps taken between iterations
  int reductions_done = 0;
  bool waiting_reductions = false;
  bool stepping = false;
  bool has_core = false;  // shared cores: the rank holds one (computing, stepping, or ready to go on)
  bool spinning = false;  // turns: it holds its core while it waits for a tensor, no other rank waiting for one
  // A runtime that posts transfers from the rank's thread: the list position whose send or receive has been
  // posted (its post paid), and whether the thread is posting now.
  std::uint32_t posted_pc = kNone;
  bool posting = false;
};

bool finite_non_negative(double s) { return std::isfinite(s) && s >= 0; }

void check_stage_costs(const std::vector<StageCost>& stages) {
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const StageCost& c = stages[s];
    const std::pair<const char*, double> fields[] = {
        {"forward_s", c.forward_s},         {"backward_input_s", c.backward_input_s},
        {"backward_weight_s", c.backward_weight_s}, {"grad_reduce_s", c.grad_reduce_s},
        {"optimizer_s", c.optimizer_s},     {"activation_bytes", c.activation_bytes},
        {"weight_grad_bytes", c.weight_grad_bytes}, {"output_bytes", c.output_bytes},
        {"overlapped_fb_s", c.overlapped_fb_s}, {"full_backward_saving_s", c.full_backward_saving_s}};
    for (const auto& [name, value] : fields)
      if (!finite_non_negative(value))
        throw_bad_input("stage costs: stage {} {} is {}; it must be a finite number >= 0", s, name, value);
  }
}

class PipelineSimulation {
 public:
  // `iterations` > 1: `schedule` holds that many copies of one iteration's lists back to back (the
  // micro-batches of copy k numbered from k m), and ranks step their optimizer between them.
  PipelineSimulation(const SimInput& in, const Schedule& schedule, int iterations, SimObserver* observer)
      : in_(in), schedule_(schedule), observer_(observer), iterations_(iterations) {
    setup();
  }

  SimResult run() {
    if (observer_) observer_->on_start(num_ranks_);
    for (int r = 0; r < num_ranks_; ++r) advance(r);
    engine_.run([this](const EngineEvent& e) { handle(e); });
    check_finished();
    return result();
  }

 private:
  // ---- setup: turn the lowered lists into steps and match every send with its receive ----
  void setup() {
    num_ranks_ = schedule_.num_ranks();
    num_stages_ = schedule_.num_stages();
    m_ = schedule_.microbatches;
    if (m_ <= 0) throw_bad_input("schedule {}: microbatches is {}; it must be >= 1", schedule_.name, m_);
    if (schedule_.copies < 1 || (m_ / iterations_) % schedule_.copies != 0 || num_stages_ < schedule_.copies ||
        num_stages_ % schedule_.copies != 0)
      throw_bad_input("schedule {}: {} micro-batches and {} stages do not split evenly over {} copies of the model",
                      schedule_.name, m_ / iterations_, num_stages_, schedule_.copies);
    if (num_ranks_ <= 0 || static_cast<int>(schedule_.ranks.size()) != num_ranks_)
      throw_bad_input("schedule {}: {} rank lists for {} ranks in the placement; give one list per rank",
                      schedule_.name, schedule_.ranks.size(), num_ranks_);
    for (int s = 0; s < num_stages_; ++s) {
      int r = schedule_.placement.rank_of(s);
      if (r < 0 || r >= num_ranks_)
        throw_bad_input("schedule {}: placement puts stage {} on rank {}; ranks are 0..{}", schedule_.name, s, r,
                        num_ranks_ - 1);
    }
    if (static_cast<int>(in_.stages.size()) != num_stages_)
      throw_bad_input("stage costs: {} given, the schedule {} has {} stages; give one cost per stage",
                      in_.stages.size(), schedule_.name, num_stages_);
    check_stage_costs(in_.stages);
    rank_gpu_ = in_.rank_gpu;
    if (rank_gpu_.empty()) {
      for (int r = 0; r < num_ranks_; ++r) rank_gpu_.push_back(r);
    } else if (static_cast<int>(rank_gpu_.size()) != num_ranks_) {
      throw_bad_input("rank_gpu: {} entries for {} pipeline ranks; give one GPU per rank or none", rank_gpu_.size(),
                      num_ranks_);
    }
    for (int s = 0; s < num_stages_; ++s)
      for (Op op : {Op::F, Op::B, Op::W, Op::BW}) costs_.push_back(cost_of(op, s));
    composite_base_ = static_cast<std::uint32_t>(costs_.size());

    const auto um = static_cast<std::size_t>(m_);
    keys_ = static_cast<std::size_t>(num_stages_) * um;
    if (2 * keys_ >= kRecvStep) throw_bad_input("schedule {}: too many stages x micro-batches", schedule_.name);
    flags_.assign(2 * keys_, 0);
    pair_link_.assign(static_cast<std::size_t>(num_ranks_) * static_cast<std::size_t>(num_ranks_), -1);
    boundaries_.assign(2 * static_cast<std::size_t>(num_stages_), Boundary{});
    // Where each stage's inputs come from, looked up for every action set up: -1 at its copy's ends.
    from_rank_.assign(2 * static_cast<std::size_t>(num_stages_), -1);
    for (int s = 0; s < num_stages_; ++s) {
      if (schedule_.has_previous(s)) from_rank_[boundary_index(true, s)] = schedule_.placement.rank_of(s - 1);
      if (schedule_.has_next(s)) from_rank_[boundary_index(false, s)] = schedule_.placement.rank_of(s + 1);
    }
    for (int s = 0; s < num_stages_; ++s) {
      for (bool fwd : {true, false}) {
        const int to = fwd ? s + 1 : s - 1;
        if (to < 0 || to >= num_stages_) continue;
        Boundary& b = boundaries_[boundary_index(fwd, s)];
        b.src = schedule_.placement.rank_of(s);
        b.dst = schedule_.placement.rank_of(to);
        // The tensor between stages s and s+1 has the shape of stage s's output, in both directions
        // (the gradient of stage s+1's input is the size of that input).
        b.bytes = in_.stages[static_cast<std::size_t>(fwd ? s : to)].output_bytes;
        if (b.src != b.dst) b.link = link_between(b.src, b.dst);
      }
    }
    std::vector<std::uint8_t> done(keys_, 0);  // bit 0: forward output computed, bit 1: input gradient
    std::vector<std::size_t> sends(static_cast<std::size_t>(num_ranks_), 0);
    std::size_t num_sends = 0, num_recvs = 0;

    offsets_.assign(static_cast<std::size_t>(num_ranks_) + 1, 0);
    for (int r = 0; r < num_ranks_; ++r)
      offsets_[static_cast<std::size_t>(r) + 1] =
          offsets_[static_cast<std::size_t>(r)] + schedule_.ranks[static_cast<std::size_t>(r)].size();
    if (offsets_.back() >= kNone) throw_bad_input("schedule {}: too many actions", schedule_.name);
    steps_ = std::make_unique_for_overwrite<Step[]>(offsets_.back());

    const double sm_share = in_.cost ? in_.cost->all_to_all_sm_share() : 0.0;  // of every F&B composite
    for (int r = 0; r < num_ranks_; ++r) {
      const auto& list = schedule_.ranks[static_cast<std::size_t>(r)];
      Step* steps = steps_.get() + offsets_[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        Step& st = steps[i];
        st.input = kNone;
        check_action(r, a);
        const std::size_t key = static_cast<std::size_t>(a.stage) * um + static_cast<std::size_t>(a.microbatch);
        switch (a.op) {
          case Op::F:
          case Op::B:
          case Op::W:
          case Op::BW:
            st.index = static_cast<std::uint32_t>(a.stage * kOpsPerStage + op_slot(a.op));
            if (a.op == Op::F) st.input = remote_input(r, true, a.stage, a.microbatch);
            if (a.op == Op::B || a.op == Op::BW) st.input = remote_input(r, false, a.stage, a.microbatch);
            if (a.op == Op::F) done[key] |= 1;
            if (a.op == Op::B || a.op == Op::BW) done[key] |= 2;
            break;
          case Op::FB: {
            // With expert all-to-alls, each half's run while the other computes (core/overlapped_pair.hpp);
            // else the overlapped pair's own time when the forward half's stage gives one; otherwise the
            // forward of one plus the full backward of the other, as if run one after the other.
            const ComputeCost& f = costs_[static_cast<std::size_t>(a.stage * kOpsPerStage + op_slot(Op::F))];
            const ComputeCost& b = costs_[static_cast<std::size_t>(a.stage2 * kOpsPerStage + op_slot(Op::BW))];
            const StageCost& forward_stage = in_.stages[static_cast<std::size_t>(a.stage)];
            const StageCost& backward_stage = in_.stages[static_cast<std::size_t>(a.stage2)];
            const double overlapped = forward_stage.overlapped_fb_s;
            ComputeCost fb = f;
            fb.duration = overlapped > 0 ? overlapped : f.duration + b.duration;
            if (forward_stage.expert_comm_forward_s + backward_stage.expert_comm_backward_s > 0)
              fb.duration = std::min(fb.duration,
                                     overlapped_pair_time(f.duration, forward_stage.expert_comm_forward_s, b.duration,
                                                          backward_stage.expert_comm_backward_s, sm_share));
            // One host thread issues both halves (CostModel::host_time).
            fb.duration = std::max(fb.duration, forward_stage.host_forward_s + backward_stage.host_backward_s);
            fb.release = b.release;
            fb.held_end = b.held_end;
            fb.grad_stage = b.grad_stage;
            fb.frees = true;
            st.index = static_cast<std::uint32_t>(costs_.size());
            st.input = remote_input(r, true, a.stage, a.microbatch);
            costs_.push_back(fb);
            second_input_.push_back(remote_input(r, false, a.stage2, a.microbatch2));
            done[key] |= 1;
            done[static_cast<std::size_t>(a.stage2) * um + static_cast<std::size_t>(a.microbatch2)] |= 2;
            break;
          }
          case Op::SendF:
          case Op::SendB: {
            const bool fwd = a.op == Op::SendF;
            const int to_stage = fwd ? a.stage + 1 : a.stage - 1;
            if (from_rank_[boundary_index(!fwd, a.stage)] < 0)  // no neighbour on that side in its copy
              throw_bad_input("schedule {}: rank {} has {}, but stage {} has no {} stage to send to", schedule_.name, r,
                              to_text(a), a.stage, fwd ? "next" : "previous");
            if (!(done[key] & (fwd ? 1 : 2)))
              throw_bad_input("schedule {}: rank {} has {} before the action that computes its tensor", schedule_.name,
                              r, to_text(a));
            if (schedule_.placement.rank_of(to_stage) == r)
              throw_bad_input("schedule {}: rank {} has {}, but stages {} and {} are both on it; no send is needed",
                              schedule_.name, r, to_text(a), a.stage, to_stage);
            const std::uint32_t id = transfer_id(fwd, a.stage, a.microbatch);
            if (flags_[id] & kSent) throw_bad_input("schedule {}: {} appears twice", schedule_.name, to_text(a));
            flags_[id] |= kSent;
            st.input = kSendStep;
            st.index = id;
            ++sends[static_cast<std::size_t>(r)];
            ++num_sends;
            break;
          }
          case Op::RecvF:
          case Op::RecvB: {
            const bool fwd = a.op == Op::RecvF;
            const int from_stage = fwd ? a.stage - 1 : a.stage + 1;
            if (from_rank_[boundary_index(fwd, a.stage)] < 0)
              throw_bad_input("schedule {}: rank {} has {} but no rank sends it", schedule_.name, r, to_text(a));
            const std::uint32_t id = transfer_id(fwd, from_stage, a.microbatch);
            if (flags_[id] & kReceived) throw_bad_input("schedule {}: {} appears twice", schedule_.name, to_text(a));
            flags_[id] |= kReceived;  // the placement puts the receiving stage on r
            st.input = kRecvStep;
            st.index = id;
            ++num_recvs;
            break;
          }
        }
      }
    }
    if (num_sends != num_recvs || !all_matched()) report_unmatched();
    if (observer_) {
      posted_at_.assign(flags_.size(), 0.0);
      recv_step_.assign(flags_.size(), kNone);
    }

    ranks_.assign(static_cast<std::size_t>(num_ranks_), RankState{});
    for (int r = 0; r < num_ranks_; ++r) {
      RankState& R = ranks_[static_cast<std::size_t>(r)];
      R.steps = steps_.get() + offsets_[static_cast<std::size_t>(r)];
      R.size = static_cast<std::uint32_t>(offsets_[static_cast<std::size_t>(r) + 1] -
                                          offsets_[static_cast<std::size_t>(r)]);
      R.send.reserve(sends[static_cast<std::size_t>(r)]);
    }
    grad_count_.assign(static_cast<std::size_t>(num_stages_), 0);
    iteration_m_ = m_ / iterations_;
    stage_m_ = iteration_m_ / schedule_.copies;  // a stage sees its copy's share of each iteration's micro-batches
    optimizer_s_.assign(static_cast<std::size_t>(num_ranks_), 0.0);
    reducing_stages_.assign(static_cast<std::size_t>(num_ranks_), 0);
    for (int s = 0; s < num_stages_; ++s) {
      const auto r = static_cast<std::size_t>(schedule_.placement.rank_of(s));
      optimizer_s_[r] += in_.stages[static_cast<std::size_t>(s)].optimizer_s;
      if (in_.stages[static_cast<std::size_t>(s)].grad_reduce_s > 0) ++reducing_stages_[r];
    }
    first_piece_.assign(static_cast<std::size_t>(num_stages_), 0);
    every_piece_.assign(static_cast<std::size_t>(num_stages_), 0);
    for (int s = 0; s < num_stages_; ++s) {
      const StageCost& c = in_.stages[static_cast<std::size_t>(s)];
      if (!(c.grad_reduce_s > 0)) continue;
      const int rank = schedule_.placement.rank_of(s);
      if (c.reduce_every_microbatch) {
        every_piece_[static_cast<std::size_t>(s)] = static_cast<std::uint32_t>(pieces_.size());
        pieces_.push_back({rank, s, c.grad_reduce_s - c.grad_gather_s, c.grad_reduce_bytes, false});
      }
      first_piece_[static_cast<std::size_t>(s)] = static_cast<std::uint32_t>(pieces_.size());
      const int buckets = std::max(1, c.grad_buckets);
      if (buckets == 1) {
        pieces_.push_back({rank, s, c.grad_reduce_s, c.grad_reduce_bytes, true});
        continue;
      }
      for (int b = 0; b < buckets; ++b)
        pieces_.push_back({rank, s, c.grad_bucket_s + (b + 1 == buckets ? c.grad_gather_s : 0.0),
                           c.grad_reduce_bytes / buckets, b + 1 == buckets});
    }
    for (RankState& R : ranks_) R.iteration_length = R.size / static_cast<std::uint32_t>(iterations_);
    iteration_end_.assign(static_cast<std::size_t>(iterations_), 0.0);
    slowdown_ = in_.cost ? in_.cost->transfer_compute_slowdown() : 0.0;
    if (!finite_non_negative(slowdown_))
      throw_bad_input("cost model {}: the compute slowdown during transfers is {}; it must be a finite number >= 0",
                      in_.cost->name(), slowdown_);
    post_s_ = in_.cost ? in_.cost->transfer_post_s() : 0.0;
    if (!finite_non_negative(post_s_))
      throw_bad_input("cost model {}: the time to post a transfer is {} s; it must be a finite number >= 0",
                      in_.cost->name(), post_s_);
    setup_shared_cores();
    engine_.reserve(static_cast<std::size_t>(num_ranks_) * 4 + 64);
  }

  // Shared cores as ceil(cores) of them at cores / ceil(cores) of a core's speed (fewer only when there are
  // fewer ranks): replicas left out of the simulation take their share of each.
  void setup_shared_cores() {
    const SharedCores& sc = in_.shared_cores;
    if (!finite_non_negative(sc.cores) || !finite_non_negative(sc.wakeup_s))
      throw_bad_input("shared cores: {} cores and a wake-up of {} s; both must be finite numbers >= 0", sc.cores,
                      sc.wakeup_s);
    if (!finite_non_negative(sc.handover_s))
      throw_bad_input("shared cores: a hand-over of {} s; it must be a finite number >= 0", sc.handover_s);
    wakeup_s_ = sc.wakeup_s;
    turns_ = sc.turns;
    handover_s_ = sc.handover_s;
    if (!(sc.cores > 0) || sc.cores >= num_ranks_) return;
    core_count_ = std::min(num_ranks_, static_cast<int>(std::ceil(sc.cores)));
    free_cores_ = core_count_;
    core_speed_ = std::min(1.0, sc.cores / core_count_);
    shares_cores_ = true;
  }

  std::size_t boundary_index(bool fwd, int from_stage) const {
    return (fwd ? 0 : static_cast<std::size_t>(num_stages_)) + static_cast<std::size_t>(from_stage);
  }
  std::uint32_t transfer_id(bool fwd, int from_stage, int mb) const {
    const std::size_t within = static_cast<std::size_t>(from_stage) * static_cast<std::size_t>(m_) +
                               static_cast<std::size_t>(mb);
    return static_cast<std::uint32_t>((fwd ? 0 : keys_) + within);
  }
  struct TransferKey {
    bool fwd;
    int from_stage;
    int mb;
  };
  TransferKey decode(std::uint32_t id) const {
    const bool fwd = id < keys_;
    const auto rest = static_cast<std::uint32_t>(fwd ? id : id - keys_);
    const auto um = static_cast<std::uint32_t>(m_);
    return {fwd, static_cast<int>(rest / um), static_cast<int>(rest % um)};
  }
  const Boundary& boundary_of(const TransferKey& k) const { return boundaries_[boundary_index(k.fwd, k.from_stage)]; }
  static Action send_action(const TransferKey& k) { return Action{k.fwd ? Op::SendF : Op::SendB, k.from_stage, k.mb}; }

  // Every send has its receive when each transfer has both or neither.
  bool all_matched() const {
    for (std::uint8_t f : flags_)
      if (((f & kSent) != 0) != ((f & kReceived) != 0)) return false;
    return true;
  }

  [[noreturn]] void report_unmatched() const {
    for (std::uint32_t id = 0; id < flags_.size(); ++id) {
      if ((flags_[id] & (kSent | kReceived)) != kReceived) continue;
      const TransferKey k = decode(id);
      const int to = k.fwd ? k.from_stage + 1 : k.from_stage - 1;
      throw_bad_input("schedule {}: rank {} has {} but no rank sends it", schedule_.name, boundary_of(k).dst,
                      to_text(Action{k.fwd ? Op::RecvF : Op::RecvB, to, k.mb}));
    }
    for (std::uint32_t id = 0; id < flags_.size(); ++id) {
      if ((flags_[id] & (kSent | kReceived)) != kSent) continue;
      const TransferKey k = decode(id);
      throw_bad_input("schedule {}: rank {} has {} but rank {} never receives it", schedule_.name, boundary_of(k).src,
                      to_text(send_action(k)), boundary_of(k).dst);
    }
    throw_runtime("schedule {}: sends and receives do not pair up", schedule_.name);
  }

  static int op_slot(Op op) { return op == Op::F ? 0 : op == Op::B ? 1 : op == Op::W ? 2 : 3; }

  void check_action(int r, const Action& a) const {
    auto bad_index = [&](int stage, int mb) { return stage < 0 || stage >= num_stages_ || mb < 0 || mb >= m_; };
    if (bad_index(a.stage, a.microbatch) || (a.op == Op::FB && bad_index(a.stage2, a.microbatch2)))
      throw_bad_input("schedule {}: rank {} has {}; stages are 0..{} and micro-batches 0..{}", schedule_.name, r,
                      to_text(a), num_stages_ - 1, m_ - 1);
    // Every action, sends and receives included, runs on the rank that holds its stage.
    for (int stage : {a.stage, a.op == Op::FB ? a.stage2 : a.stage}) {
      const int owner = schedule_.placement.rank_of(stage);
      if (owner != r)
        throw_bad_input("schedule {}: rank {} has {}, but the placement puts stage {} on rank {}", schedule_.name, r,
                        to_text(a), stage, owner);
    }
  }

  ComputeCost cost_of(Op op, int stage) const {
    const StageCost& c = in_.stages[static_cast<std::size_t>(stage)];
    ComputeCost k;
    switch (op) {
      case Op::F:
        k.duration = c.forward_s;
        k.alloc = c.activation_bytes;
        k.held_start = 1;
        k.allocates = true;
        break;
      case Op::B:
        k.duration = c.backward_input_s;
        // A B that keeps more for W than F kept for it grows the memory as it starts.
        if (c.weight_grad_bytes > c.activation_bytes) {
          k.alloc = c.weight_grad_bytes - c.activation_bytes;
          k.allocates = true;
        } else {
          k.release = c.activation_bytes - c.weight_grad_bytes;
          k.frees = true;
        }
        break;
      case Op::W:
        k.duration = c.backward_weight_s;
        k.release = c.weight_grad_bytes;
        k.held_end = -1;
        k.grad_stage = stage;
        k.frees = true;
        break;
      default:  // BW
        k.duration = c.full_backward_s();
        k.release = c.activation_bytes;
        k.held_end = -1;
        k.grad_stage = stage;
        k.frees = true;
        break;
    }
    return k;
  }

  // One link per ordered GPU pair (a direction of a GPU-to-GPU path): transfers in the same direction
  // between the same two GPUs share its bandwidth. Looked up by rank pair, so the cluster is asked
  // once per pair.
  int link_between(int src, int dst) {
    int& cached = pair_link_[static_cast<std::size_t>(src) * static_cast<std::size_t>(num_ranks_) +
                             static_cast<std::size_t>(dst)];
    if (cached >= 0) return cached;
    const int ga = rank_gpu_[static_cast<std::size_t>(src)];
    const int gb = rank_gpu_[static_cast<std::size_t>(dst)];
    auto it = gpu_link_.find({ga, gb});
    if (it == gpu_link_.end()) {
      LinkSpec spec{std::numeric_limits<double>::infinity(), 0.0};
      if (!in_.cluster.ideal) {
        spec = in_.cluster.link(ga, gb);
        if (in_.cost) spec = in_.cost->p2p_link(spec);
        if (!(spec.bandwidth_bytes_per_s > 0))
          throw_bad_input("cluster {}: the link from GPU {} to GPU {} has bandwidth {} B/s; give it a positive "
                          "bandwidth_bytes_per_s",
                          in_.cluster.name, ga, gb, spec.bandwidth_bytes_per_s);
        if (!finite_non_negative(spec.latency_s))
          throw_bad_input("cluster {}: the link from GPU {} to GPU {} has latency {} s; give it a latency_s >= 0",
                          in_.cluster.name, ga, gb, spec.latency_s);
      }
      it = gpu_link_.emplace(std::make_pair(ga, gb), links_.add_link(spec.bandwidth_bytes_per_s, spec.latency_s))
               .first;
    }
    cached = it->second;
    return cached;
  }

  // ---- the run ----
  void handle(const EngineEvent& e) {
    switch (e.kind) {
      case kComputeDone:
        if (e.version == ranks_[e.target].compute_version) compute_done(static_cast<int>(e.target));
        break;
      case kFlow: {
        std::uint32_t id;
        if (links_.finish(engine_, e, id)) transfer_done(id);
        break;
      }
      case kCollectiveDone: collective_done(static_cast<int>(e.target)); break;
      case kOptimizerDone: optimizer_done(static_cast<int>(e.target)); break;
      case kBucketReady: bucket_ready(e.target); break;
      case kWoken: advance(static_cast<int>(e.target)); break;
      case kPostDone:
        ranks_[e.target].posting = false;
        advance(static_cast<int>(e.target));
        break;
      default: break;
    }
  }

  // Runs the rank's list from its current position until a compute step starts, a receive blocks or
  // the rank reaches the end of an iteration (its optimizer step, when several run back to back).
  void advance(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    const double now = engine_.now();
    if (R.posting) return;  // its thread is busy posting; kPostDone goes on
    while (R.pc < R.size) {
      if (R.iterations_passed + 1 < iterations_ &&
          R.pc == R.iteration_length * static_cast<std::uint32_t>(R.iterations_passed + 1)) {
        if (!R.stepping) try_optimizer(r);
        return;
      }
      const Step st = R.steps[R.pc];
      switch (st.kind()) {
        case StepKind::Compute: {
          if (const std::uint32_t id = missing_input(st); id != kNone) {
            R.waiting_for = id;
            if (turns_ && R.has_core && core_queue_.empty()) {
              R.spinning = true;
              spinners_.push_back(static_cast<std::uint32_t>(r));
              return;
            }
            release_core(r);
            return;
          }
          if (!take_core(r)) return;
          const ComputeCost& c = costs_[st.index];
          R.compute_start = now;
          R.cost = &c;
          if (c.grad_stage >= 0) release_early_buckets(c, now);
          if (c.allocates) {
            R.bytes += c.alloc;
            R.peak_bytes = std::max(R.peak_bytes, R.bytes);
            if (observer_) observer_->on_memory(r, now, R.bytes);
          }
          R.held += c.held_start;
          R.peak_held = std::max(R.peak_held, R.held);
          if (slowdown_ > 0) {
            R.computing = true;
            R.compute_left = c.duration;
            R.segment_start = now;
            R.compute_speed = core_speed_ * (R.transfers_in_flight > 0 ? 1 / (1 + slowdown_) : 1.0);
            engine_.at(now + R.compute_left / R.compute_speed, kComputeDone, static_cast<std::uint32_t>(r),
                       ++R.compute_version);
          } else {
            engine_.at(now + c.duration / core_speed_, kComputeDone, static_cast<std::uint32_t>(r));
          }
          return;
        }
        case StepKind::Send:
          if (post_s_ > 0 && !posted(r, R, now)) return;
          R.send.push(st.index);
          try_send(r);
          ++R.pc;
          break;
        case StepKind::Recv:
          if (post_s_ > 0 && !posted(r, R, now)) return;
          if (flags_[st.index] & kArrived) {
            if (observer_) emit(r, Lane::Recv, R.pc, now, now, boundary_of(decode(st.index)).bytes, st.index);
          } else if (observer_) {
            flags_[st.index] |= kPosted;
            posted_at_[st.index] = now;
            recv_step_[st.index] = R.pc;
          }
          ++R.pc;
          break;
      }
    }
    release_core(r);
  }

  // A send or receive first costs the rank's thread the runtime's time to post it (CostModel::transfer_post_s,
  // on its core), then goes ahead as posted: true when the rank goes on now, false when it waits for its core
  // or for its post to be done (kPostDone). Asked only when post_s_ > 0.
  bool posted(int r, RankState& R, double now) {
    if (R.posted_pc == R.pc) return true;
    if (!take_core(r)) return false;
    R.posted_pc = R.pc;
    R.posting = true;
    engine_.at(now + post_s_ / core_speed_, kPostDone, static_cast<std::uint32_t>(r));
    return false;
  }

  // Shared cores: whether rank r holds one, taking a free one; without, it queues (in the order ranks became
  // ready, as the OS's run queue serves threads whose turns are shorter than its time slice) and runs on
  // from advance() when one is handed to it.
  // With turns and no core free, a rank spinning on its core for a tensor hands it over (the one spinning
  // longest) before anyone queues.
  bool take_core(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    if (!shares_cores_ || R.has_core) return true;
    if (free_cores_ == 0 && !spinners_.empty()) {
      RankState& S = ranks_[spinners_.front()];
      spinners_.pop_front();
      S.spinning = false;
      S.has_core = false;
      R.has_core = true;
      return !hand_over(r);
    }
    if (free_cores_ == 0) {
      core_queue_.push_back(static_cast<std::uint32_t>(r));
      return false;
    }
    --free_cores_;
    R.has_core = true;
    return true;
  }

  // A core handed over to rank r, which holds it now: with turns it reaches the rank handover_s later (true:
  // the rank runs on from advance() then).
  bool hand_over(int r) {
    if (!turns_ || !(handover_s_ > 0)) return false;
    engine_.at(engine_.now() + handover_s_, kWoken, static_cast<std::uint32_t>(r));
    return true;
  }

  // Rank r stops computing (it waits for a tensor, its reductions or the flush): its core goes to the rank
  // that has waited longest for one.
  void release_core(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    if (!R.has_core) return;
    R.has_core = false;
    ++free_cores_;
    if (core_queue_.empty()) return;
    const std::uint32_t next = core_queue_.front();
    core_queue_.pop_front();
    --free_cores_;
    ranks_[next].has_core = true;
    if (!hand_over(static_cast<int>(next))) advance(static_cast<int>(next));
  }

  void compute_done(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    const ComputeCost& c = *R.cost;
    const double now = engine_.now();
    R.busy += slowdown_ > 0 || shares_cores_ ? now - R.compute_start : c.duration;
    R.computing = false;
    R.last_compute_end = now;
    if (c.frees) {
      R.bytes -= c.release;
      if (observer_) observer_->on_memory(r, now, R.bytes);
    }
    R.held += c.held_end;
    if (observer_) {
      emit(r, Lane::Compute, R.pc, R.compute_start, now, 0, -1);
      const Action& a = schedule_.ranks[static_cast<std::size_t>(r)][R.pc];
      const double all_to_all = std::min(now - R.compute_start, all_to_all_seconds(a));
      if (all_to_all > 0) emit(r, Lane::AllToAll, a, R.compute_start, R.compute_start + all_to_all, 0, -1);
    }
    if (c.grad_stage >= 0) gradients_done(r, static_cast<std::size_t>(c.grad_stage));
    ++R.pc;
    advance(r);
  }

  void try_send(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    std::uint32_t id;
    if (!R.send.try_start(id)) return;
    const Boundary& b = boundary_of(decode(id));
    R.send_start = engine_.now();
    R.p2p_sent += b.bytes;
    links_.start(engine_, b.link, b.bytes, kFlow, id);
    transfer_touches(b.src, +1);
    transfer_touches(b.dst, +1);
  }

  // A transfer to or from rank r started (+1) or arrived (-1). When that starts or ends the rank's time
  // with transfers in flight, the compute in progress changes speed: what it has left is brought up to
  // date and its completion re-issued under a new version.
  void transfer_touches(int r, int delta) {
    if (!(slowdown_ > 0)) return;
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    const bool before = R.transfers_in_flight > 0;
    R.transfers_in_flight += delta;
    const bool after = R.transfers_in_flight > 0;
    if (before == after || !R.computing) return;
    const double now = engine_.now();
    R.compute_left = std::max(0.0, R.compute_left - (now - R.segment_start) * R.compute_speed);
    R.segment_start = now;
    R.compute_speed = core_speed_ * (after ? 1 / (1 + slowdown_) : 1.0);
    engine_.at(now + R.compute_left / R.compute_speed, kComputeDone, static_cast<std::uint32_t>(r), ++R.compute_version);
  }

  void transfer_done(std::uint32_t id) {
    const TransferKey k = decode(id);
    const Boundary& b = boundary_of(k);
    const double now = engine_.now();
    flags_[id] |= kArrived;
    last_arrival_ = std::max(last_arrival_, now);
    transfer_touches(b.src, -1);
    transfer_touches(b.dst, -1);
    RankState& S = ranks_[static_cast<std::size_t>(b.src)];
    const double start = S.send_start;  // this transfer's: the lane runs one at a time
    if (observer_) emit(b.src, Lane::Send, send_action(k), start, now, b.bytes, id);
    S.send.finish();
    try_send(b.src);
    // A posted receive ends as its data arrives: from when both it was posted and the data sent.
    if (observer_ && (flags_[id] & kPosted)) emit(b.dst, Lane::Recv, recv_step_[id], std::max(posted_at_[id], start), now, b.bytes, id);
    RankState& D = ranks_[static_cast<std::size_t>(b.dst)];
    if (D.waiting_for == id) {
      D.waiting_for = kNone;
      // Its core kept: it runs on at once.
      if (D.spinning) {
        D.spinning = false;
        spinners_.erase(std::find(spinners_.begin(), spinners_.end(), b.dst));
        advance(b.dst);
        return;
      }
      // A rank that slept on the receive runs again when the OS has woken it on a free core; without one it
      // waits in the run queue, and is switched in when a core frees (take_core()).
      if (wakeup_s_ > 0 && (!shares_cores_ || free_cores_ > 0))
        engine_.at(now + wakeup_s_, kWoken, static_cast<std::uint32_t>(b.dst));
      else
        advance(b.dst);
    }
  }

  // A stage's gradients of one micro-batch are complete: the iteration's last queues the stage's last
  // reduction piece (the earlier buckets queued themselves during the action); ZeRO-2/3 reduce-scatter the
  // others' at once.
  void gradients_done(int r, std::size_t stage) {
    const StageCost& sc = in_.stages[stage];
    const bool last = ++grad_count_[stage] % stage_m_ == 0;
    if (!(sc.grad_reduce_s > 0) || (!last && !sc.reduce_every_microbatch)) return;
    ranks_[static_cast<std::size_t>(r)].collective.push(
        last ? first_piece_[stage] + static_cast<std::uint32_t>(std::max(1, sc.grad_buckets) - 1) : every_piece_[stage]);
    try_collective(r);
  }

  // The last micro-batch's weight-gradient action of a stage produces its gradients layer after layer:
  // bucket b of k is full at (b + 1) / k of the action and its reduction queues then (Megatron's
  // --overlap-grad-reduce); the last bucket queues when the action ends.
  void release_early_buckets(const ComputeCost& c, double now) {
    const StageCost& sc = in_.stages[static_cast<std::size_t>(c.grad_stage)];
    const int buckets = sc.grad_buckets;
    if (buckets <= 1 || !(sc.grad_reduce_s > 0)) return;
    if ((grad_count_[static_cast<std::size_t>(c.grad_stage)] + 1) % stage_m_ != 0) return;
    const std::uint32_t first = first_piece_[static_cast<std::size_t>(c.grad_stage)];
    for (int b = 0; b + 1 < buckets; ++b)
      engine_.at(now + c.duration * (b + 1) / buckets, kBucketReady, first + static_cast<std::uint32_t>(b));
  }

  void bucket_ready(std::uint32_t piece) {
    const int r = pieces_[piece].rank;
    ranks_[static_cast<std::size_t>(r)].collective.push(piece);
    try_collective(r);
  }

  void try_collective(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    std::uint32_t piece;
    if (!R.collective.try_start(piece)) return;
    R.collective_start = engine_.now();
    engine_.at(R.collective_start + pieces_[piece].duration, kCollectiveDone, static_cast<std::uint32_t>(r));
  }

  // The rank's optimizer step between two iterations, once its reductions of the first are done.
  void try_optimizer(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    const int needed = (R.iterations_passed + 1) * reducing_stages_[static_cast<std::size_t>(r)];
    R.waiting_reductions = R.reductions_done < needed;
    if (R.waiting_reductions) return release_core(r);
    if (!take_core(r)) return;
    R.stepping = true;
    R.optimizer_start = engine_.now();
    engine_.at(engine_.now() + optimizer_time(r), kOptimizerDone, static_cast<std::uint32_t>(r));
  }

  void optimizer_done(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    double& end = iteration_end_[static_cast<std::size_t>(R.iterations_passed)];
    end = std::max(end, engine_.now());
    if (observer_) observer_->on_event(optimizer_step_event(r, R.optimizer_start, engine_.now()));
    R.stepping = false;
    ++R.iterations_passed;
    advance(r);
  }

  void collective_done(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    const double now = engine_.now();
    R.collective_end = now;
    const ReductionPiece& piece = pieces_[R.collective.current()];
    if (piece.last) ++R.reductions_done;
    if (R.waiting_reductions) try_optimizer(r);
    if (observer_) {
      SimEvent e;
      e.rank = r;
      e.lane = Lane::Collective;
      e.action = Action{Op::BW, piece.stage, -1};
      e.start_s = R.collective_start;
      e.end_s = now;
      e.bytes = piece.bytes;
      observer_->on_event(e);
    }
    R.collective.finish();
    try_collective(r);
  }

  // The expert all-to-alls a compute action runs (the AllToAll lane).
  double all_to_all_seconds(const Action& a) const {
    const auto stage = [&](int s) -> const StageCost& { return in_.stages[static_cast<std::size_t>(s)]; };
    switch (a.op) {
      case Op::F: return stage(a.stage).expert_comm_forward_s;
      case Op::B:
      case Op::BW: return stage(a.stage).expert_comm_backward_s;
      case Op::FB: return stage(a.stage).expert_comm_forward_s + stage(a.stage2).expert_comm_backward_s;
      default: return 0;
    }
  }

  void emit(int r, Lane lane, std::uint32_t index, double start, double end, double bytes, long flow) {
    emit(r, lane, schedule_.ranks[static_cast<std::size_t>(r)][index], start, end, bytes, flow);
  }

  void emit(int r, Lane lane, const Action& action, double start, double end, double bytes, long flow) {
    SimEvent e;
    e.rank = r;
    e.lane = lane;
    e.action = action;
    e.start_s = start;
    e.end_s = end;
    e.bytes = bytes;
    e.flow_id = flow;
    observer_->on_event(e);
  }

  // The transfer that brings the input of (stage, mb) to rank r from another rank, forward (the
  // activation from stage - 1) or backward (the gradient from stage + 1); kNone when it comes from r itself
  // or from no stage.
  std::uint32_t remote_input(int r, bool fwd, int stage, int mb) const {
    const int from_rank = from_rank_[boundary_index(fwd, stage)];
    if (from_rank < 0 || from_rank == r) return kNone;
    return transfer_id(fwd, fwd ? stage - 1 : stage + 1, mb);
  }

  // The first input of a compute step that has not arrived, or kNone.
  std::uint32_t missing_input(const Step& st) const {
    if (st.input != kNone && !(flags_[st.input] & kArrived)) return st.input;
    if (st.index < composite_base_) return kNone;
    const std::uint32_t second = second_input_[st.index - composite_base_];
    return second != kNone && !(flags_[second] & kArrived) ? second : kNone;
  }

  void check_finished() const {
    std::string stuck;
    for (int r = 0; r < num_ranks_; ++r) {
      const RankState& R = ranks_[static_cast<std::size_t>(r)];
      if (R.pc == R.size) continue;
      stuck += fmt::format("{}rank {} at {}", stuck.empty() ? "" : ", ", r,
                           to_text(schedule_.ranks[static_cast<std::size_t>(r)][R.pc]));
    }
    if (!stuck.empty())
      throw_bad_input("schedule {}: deadlock: {} wait for data no rank can send; reorder the sends and receives",
                      schedule_.name, stuck);
  }

  SimResult result() const {
    SimResult out;
    double flush_end = last_arrival_;
    std::vector<double> state(static_cast<std::size_t>(num_ranks_), 0.0), working(state);
    for (int s = 0; s < num_stages_; ++s) {
      const std::size_t r = static_cast<std::size_t>(schedule_.placement.rank_of(s));
      state[r] += in_.stages[static_cast<std::size_t>(s)].model_state_bytes;
      working[r] = std::max(working[r], in_.stages[static_cast<std::size_t>(s)].working_bytes);
    }
    double last_compute = 0;
    std::vector<double> step_start(static_cast<std::size_t>(num_ranks_));  // each rank's last optimizer step
    for (int r = 0; r < num_ranks_; ++r) {
      const RankState& R = ranks_[static_cast<std::size_t>(r)];
      last_compute = std::max(last_compute, R.last_compute_end);
      const double rank_end = std::max(R.last_compute_end, R.collective_end);
      flush_end = std::max(flush_end, rank_end);
      step_start[static_cast<std::size_t>(r)] = rank_end;
    }
    // Synchronous: every rank waits for the whole flush (the global gradient norm), wakes, and steps.
    if (in_.synchronous_optimizer) step_start = synchronous_step_starts(flush_end + wakeup_s_);
    double end = flush_end;
    for (int r = 0; r < num_ranks_; ++r) {
      const double start = step_start[static_cast<std::size_t>(r)];
      end = std::max(end, start + optimizer_time(r));
      if (observer_) observer_->on_event(optimizer_step_event(r, start, start + optimizer_time(r)));
    }
    out.iterations = iterations_;
    out.iteration_end_s.assign(iteration_end_.begin(), iteration_end_.end() - 1);
    out.iteration_end_s.push_back(end);
    out.simulated_time_s = end;
    const double previous = iterations_ > 1 ? out.iteration_end_s[static_cast<std::size_t>(iterations_ - 2)] : 0.0;
    out.step_time_s = end - previous;
    out.pipeline_time_s = last_compute - previous;
    // The data-parallel reduction still running after the last compute: exposed, and not bubble.
    double collectives_end = 0;
    for (const RankState& R : ranks_) collectives_end = std::max(collectives_end, R.collective_end);
    out.exposed_dp_comm_s = std::max(0.0, collectives_end - last_compute);
    double idle = 0;
    for (int r = 0; r < num_ranks_; ++r) {
      const RankState& R = ranks_[static_cast<std::size_t>(r)];
      RankStats st;
      st.rank = r;
      st.busy_s = R.busy / iterations_;
      st.idle_s = out.step_time_s - st.busy_s;
      st.activation_peak_bytes = R.peak_bytes;
      st.model_state_bytes = state[static_cast<std::size_t>(r)];
      st.working_bytes = working[static_cast<std::size_t>(r)];
      st.peak_memory_bytes = st.model_state_bytes + st.activation_peak_bytes + st.working_bytes;
      st.peak_inflight_microbatches = R.peak_held;
      st.p2p_bytes_sent = R.p2p_sent / iterations_;
      idle += std::max(0.0, st.idle_s - out.exposed_dp_comm_s);
      out.ranks.push_back(st);
    }
    out.bubble_fraction = out.step_time_s > 0 ? idle / (num_ranks_ * out.step_time_s) : 0;
    out.actions = static_cast<long>(offsets_.back());
    if (observer_) observer_->on_finish(out.step_time_s);
    return out;
  }

  // Rank r's optimizer step over its stages, at its share of a core when ranks share them.
  double optimizer_time(int r) const { return optimizer_s_[static_cast<std::size_t>(r)] / core_speed_; }

  // When each rank's synchronous optimizer step starts, the flush over at `from`: at once on devices of their
  // own; on shared cores, in rank order, each on the core that frees first.
  std::vector<double> synchronous_step_starts(double from) const {
    std::vector<double> start(static_cast<std::size_t>(num_ranks_), from);
    if (!shares_cores_) return start;
    std::vector<double> core_free(static_cast<std::size_t>(core_count_), from);
    for (int r = 0; r < num_ranks_; ++r) {
      const auto first = std::min_element(core_free.begin(), core_free.end());
      start[static_cast<std::size_t>(r)] = *first;
      *first += optimizer_time(r);
    }
    return start;
  }

  const SimInput& in_;
  const Schedule& schedule_;
  SimObserver* observer_;
  int num_ranks_ = 0;
  int num_stages_ = 0;
  int m_ = 0;
  std::vector<int> rank_gpu_;
  std::vector<std::size_t> offsets_;
  std::vector<ComputeCost> costs_;
  std::unique_ptr<Step[]> steps_;  // every rank's, rank after rank (offsets_)
  std::vector<int> pair_link_;                 // src rank * ranks + dst rank -> link
  std::map<std::pair<int, int>, int> gpu_link_;  // (GPU, GPU) -> link
  std::size_t keys_ = 0;                 // stages x micro-batches
  std::vector<Boundary> boundaries_;     // forward from stage s at s, backward from s at stages + s
  // The rank a stage's forward input comes from (at s) and its output gradient (at stages + s); -1 where its
  // copy of the model has no such stage.
  std::vector<int> from_rank_;
  std::vector<std::uint8_t> flags_;      // per transfer: TransferFlag bits
  std::vector<double> posted_at_;        // per transfer: when its receive was posted (kPosted)
  std::vector<std::uint32_t> recv_step_;  // per transfer: its receive's place in the receiving rank's list
  std::uint32_t composite_base_ = 0;         // costs_ from here on are F&B composites
  std::vector<std::uint32_t> second_input_;  // per composite: its backward half's input (as Step::input)
  std::vector<RankState> ranks_;
  std::vector<int> grad_count_;
  std::vector<ReductionPiece> pieces_;
  std::vector<std::uint32_t> first_piece_;  // per stage: its first piece in pieces_
  std::vector<std::uint32_t> every_piece_;  // per stage: the reduction of a micro-batch before the last
  double last_arrival_ = 0;
  double slowdown_ = 0;                  // the cost model's transfer_compute_slowdown()
  double post_s_ = 0;                    // the cost model's transfer_post_s()
  // Shared cores (SimInput::shared_cores): the free ones, each at core_speed_, and the ranks waiting for one.
  bool shares_cores_ = false;
  int core_count_ = 0;
  int free_cores_ = 0;
  double core_speed_ = 1;
  double wakeup_s_ = 0;
  std::deque<std::uint32_t> core_queue_;  // each rank at most once
  bool turns_ = false;                     // SharedCores::turns
  double handover_s_ = 0;
  std::deque<std::uint32_t> spinners_;     // turns: ranks spinning on their cores, longest first
  int iterations_ = 1;
  int iteration_m_ = 0;                  // micro-batches per iteration
  int stage_m_ = 0;                      // of them, those each stage runs (all of them with one copy)
  std::vector<double> optimizer_s_;      // per rank: its stages' optimizer steps
  std::vector<int> reducing_stages_;     // per rank: its stages with a gradient reduction
  std::vector<double> iteration_end_;    // per iteration but the last: the last rank's optimizer step end
  Engine engine_;
  FluidLinks links_;
};

}  // namespace

namespace {

// `iterations` copies of one iteration's lists, one after the other on every rank; copy k's
// micro-batches are numbered from k m.
Schedule back_to_back(const Schedule& one, int iterations) {
  Schedule out = one;
  out.microbatches = one.microbatches * iterations;
  for (size_t r = 0; r < one.ranks.size(); ++r) {
    auto& list = out.ranks[r];
    list.clear();
    for (int k = 0; k < iterations; ++k) {
      for (Action a : one.ranks[r]) {
        a.microbatch += k * one.microbatches;
        if (a.op == Op::FB) a.microbatch2 += k * one.microbatches;
        list.push_back(a);
      }
    }
  }
  return out;
}

}  // namespace

SimResult simulate(const SimInput& in, SimObserver* observer) {
  if (in.iterations < 1) throw_bad_input("iterations: must be at least 1, got {}", in.iterations);
  const int iterations = in.synchronous_optimizer ? 1 : in.iterations;
  if (in.schedule.lowered && iterations == 1) return PipelineSimulation(in, in.schedule, 1, observer).run();
  const Schedule lowered = in.schedule.lowered ? in.schedule : lower(in.schedule);
  if (iterations == 1) return PipelineSimulation(in, lowered, 1, observer).run();
  return PipelineSimulation(in, back_to_back(lowered, iterations), iterations, observer).run();
}

}  // namespace pw
