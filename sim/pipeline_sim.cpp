#include "sim/pipeline_sim.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <utility>

#include "core/error.hpp"
#include "sim/engine.hpp"

namespace pw {

const char* to_string(Lane lane) {
  switch (lane) {
    case Lane::Compute: return "compute";
    case Lane::Send: return "send";
    case Lane::Recv: return "recv";
    case Lane::Collective: return "collective";
  }
  return "?";
}

namespace {

enum EventKind : std::uint32_t { kComputeDone = 0, kFlow = 1, kCollectiveDone = 2 };
enum class StepKind : std::uint8_t { Compute, Send, Recv };
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

// One entry of a rank's lowered list: 8 bytes, so that the hot loop streams through them.
struct Step {
  std::uint32_t index = 0;  // Compute: into the compute costs; Send/Recv: into the transfers
  StepKind kind = StepKind::Compute;
};

struct Transfer {
  double start = 0;
  double bytes = 0;
  std::int32_t src = 0;
  std::int32_t dst = 0;
  std::int32_t link = 0;
  std::uint32_t send_step = 0;     // index in the sender's list
  std::uint32_t recv_step = kNone; // index in the receiver's list
  bool arrived = false;
};

struct RankState {
  const Step* steps = nullptr;
  std::uint32_t pc = 0;
  std::uint32_t size = 0;
  bool blocked = false;  // at a receive whose data has not arrived
  double wait_since = 0;
  double compute_start = 0;
  double collective_start = 0;
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
};

bool valid_time(double s) { return std::isfinite(s) && s >= 0; }

void check_stage_costs(const std::vector<StageCost>& stages) {
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const StageCost& c = stages[s];
    const std::pair<const char*, double> fields[] = {
        {"forward_s", c.forward_s},         {"backward_input_s", c.backward_input_s},
        {"backward_weight_s", c.backward_weight_s}, {"grad_reduce_s", c.grad_reduce_s},
        {"optimizer_s", c.optimizer_s},     {"activation_bytes", c.activation_bytes},
        {"weight_grad_bytes", c.weight_grad_bytes}, {"output_bytes", c.output_bytes}};
    for (const auto& [name, value] : fields)
      if (!valid_time(value))
        throw_bad_input("stage costs: stage {} {} is {}; it must be a finite number >= 0", s, name, value);
    if (c.weight_grad_bytes > c.activation_bytes)
      throw_bad_input("stage costs: stage {} weight_grad_bytes ({}) exceeds activation_bytes ({}); it is the part of "
                      "the activations freed at W",
                      s, c.weight_grad_bytes, c.activation_bytes);
  }
}

class PipelineSimulation {
 public:
  PipelineSimulation(const SimInput& in, const Schedule& schedule, SimObserver* observer)
      : in_(in), schedule_(schedule), observer_(observer) {
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

    const auto um = static_cast<std::size_t>(m_);
    const std::size_t keys = static_cast<std::size_t>(num_stages_) * um;
    std::vector<std::uint32_t> send_f(keys, kNone), send_b(keys, kNone);  // by the sender's (stage, mb)
    std::vector<std::uint8_t> done(keys, 0);  // bit 0: forward output computed, bit 1: input gradient

    offsets_.assign(static_cast<std::size_t>(num_ranks_) + 1, 0);
    for (int r = 0; r < num_ranks_; ++r)
      offsets_[static_cast<std::size_t>(r) + 1] =
          offsets_[static_cast<std::size_t>(r)] + schedule_.ranks[static_cast<std::size_t>(r)].size();
    steps_.resize(offsets_.back());
    if (offsets_.back() >= kNone) throw_bad_input("schedule {}: too many actions", schedule_.name);
    pair_link_.assign(static_cast<std::size_t>(num_ranks_) * static_cast<std::size_t>(num_ranks_), -1);

    for (int r = 0; r < num_ranks_; ++r) {
      const auto& list = schedule_.ranks[static_cast<std::size_t>(r)];
      Step* steps = steps_.data() + offsets_[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        Step& st = steps[i];
        check_action(r, a);
        const std::size_t key = static_cast<std::size_t>(a.stage) * um + static_cast<std::size_t>(a.microbatch);
        switch (a.op) {
          case Op::F:
          case Op::B:
          case Op::W:
          case Op::BW:
            st.kind = StepKind::Compute;
            st.index = static_cast<std::uint32_t>(a.stage * kOpsPerStage + op_slot(a.op));
            if (a.op == Op::F) done[key] |= 1;
            if (a.op == Op::B || a.op == Op::BW) done[key] |= 2;
            break;
          case Op::FB: {
            // Charged as the forward of one plus the full backward of the other, as if run one after
            // the other: StageCost has no measured cost of the overlapped pair yet.
            const ComputeCost& f = costs_[static_cast<std::size_t>(a.stage * kOpsPerStage + op_slot(Op::F))];
            const ComputeCost& b = costs_[static_cast<std::size_t>(a.stage2 * kOpsPerStage + op_slot(Op::BW))];
            ComputeCost fb = f;
            fb.duration = f.duration + b.duration;
            fb.release = b.release;
            fb.held_end = b.held_end;
            fb.grad_stage = b.grad_stage;
            fb.frees = true;
            st.kind = StepKind::Compute;
            st.index = static_cast<std::uint32_t>(costs_.size());
            costs_.push_back(fb);
            done[key] |= 1;
            done[static_cast<std::size_t>(a.stage2) * um + static_cast<std::size_t>(a.microbatch2)] |= 2;
            break;
          }
          case Op::SendF:
          case Op::SendB: {
            const bool fwd = a.op == Op::SendF;
            const int to_stage = fwd ? a.stage + 1 : a.stage - 1;
            if (to_stage < 0 || to_stage >= num_stages_)
              throw_bad_input("schedule {}: rank {} has {}, but stage {} has no {} stage to send to", schedule_.name, r,
                              to_text(a), a.stage, fwd ? "next" : "previous");
            if (!(done[key] & (fwd ? 1 : 2)))
              throw_bad_input("schedule {}: rank {} has {} before the action that computes its tensor", schedule_.name,
                              r, to_text(a));
            auto& slot = fwd ? send_f[key] : send_b[key];
            if (slot != kNone) throw_bad_input("schedule {}: {} appears twice", schedule_.name, to_text(a));
            const int dst = schedule_.placement.rank_of(to_stage);
            if (dst == r)
              throw_bad_input("schedule {}: rank {} has {}, but stages {} and {} are both on it; no send is needed",
                              schedule_.name, r, to_text(a), a.stage, to_stage);
            slot = static_cast<std::uint32_t>(transfers_.size());
            Transfer t;
            t.src = r;
            t.dst = dst;
            // The boundary tensor between stages s and s+1 has the shape of stage s's output, in both
            // directions (the gradient of stage s+1's input is the size of that input).
            t.bytes = in_.stages[static_cast<std::size_t>(fwd ? a.stage : to_stage)].output_bytes;
            t.link = link_between(r, dst);
            t.send_step = static_cast<std::uint32_t>(i);
            st.kind = StepKind::Send;
            st.index = slot;
            transfers_.push_back(t);
            break;
          }
          case Op::RecvF:
          case Op::RecvB:
            st.kind = StepKind::Recv;  // matched below, once every send is known
            break;
        }
      }
    }

    for (int r = 0; r < num_ranks_; ++r) {
      const auto& list = schedule_.ranks[static_cast<std::size_t>(r)];
      Step* steps = steps_.data() + offsets_[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < list.size(); ++i) {
        if (steps[i].kind != StepKind::Recv) continue;
        const Action& a = list[i];
        const bool fwd = a.op == Op::RecvF;
        const int from_stage = fwd ? a.stage - 1 : a.stage + 1;
        std::uint32_t id = kNone;
        if (from_stage >= 0 && from_stage < num_stages_) {
          const std::size_t key = static_cast<std::size_t>(from_stage) * um + static_cast<std::size_t>(a.microbatch);
          id = fwd ? send_f[key] : send_b[key];
        }
        if (id == kNone)
          throw_bad_input("schedule {}: rank {} has {} but no rank sends it", schedule_.name, r, to_text(a));
        Transfer& t = transfers_[id];
        if (t.recv_step != kNone) throw_bad_input("schedule {}: {} appears twice", schedule_.name, to_text(a));
        if (t.dst != r)
          throw_bad_input("schedule {}: rank {} has {}, but stage {} is on rank {}", schedule_.name, r, to_text(a),
                          a.stage, t.dst);
        t.recv_step = static_cast<std::uint32_t>(i);
        steps[i].index = id;
      }
    }
    for (const Transfer& t : transfers_)
      if (t.recv_step == kNone)
        throw_bad_input("schedule {}: rank {} has {} but rank {} never receives it", schedule_.name, t.src,
                        to_text(schedule_.ranks[static_cast<std::size_t>(t.src)][t.send_step]), t.dst);

    ranks_.assign(static_cast<std::size_t>(num_ranks_), RankState{});
    std::vector<std::size_t> sends(static_cast<std::size_t>(num_ranks_), 0);
    for (const Transfer& t : transfers_) ++sends[static_cast<std::size_t>(t.src)];
    for (int r = 0; r < num_ranks_; ++r) {
      RankState& R = ranks_[static_cast<std::size_t>(r)];
      R.steps = steps_.data() + offsets_[static_cast<std::size_t>(r)];
      R.size = static_cast<std::uint32_t>(offsets_[static_cast<std::size_t>(r) + 1] -
                                          offsets_[static_cast<std::size_t>(r)]);
      R.send.reserve(sends[static_cast<std::size_t>(r)]);
    }
    grad_count_.assign(static_cast<std::size_t>(num_stages_), 0);
    engine_.reserve(static_cast<std::size_t>(num_ranks_) * 4 + 64);
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
        k.release = c.activation_bytes - c.weight_grad_bytes;
        k.frees = true;
        break;
      case Op::W:
        k.duration = c.backward_weight_s;
        k.release = c.weight_grad_bytes;
        k.held_end = -1;
        k.grad_stage = stage;
        k.frees = true;
        break;
      default:  // BW
        k.duration = c.backward_input_s + c.backward_weight_s;
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
        if (!valid_time(spec.latency_s))
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
      case kComputeDone: compute_done(static_cast<int>(e.target)); break;
      case kFlow: {
        std::uint32_t id;
        if (links_.finish(engine_, e, id)) transfer_done(id);
        break;
      }
      case kCollectiveDone: collective_done(static_cast<int>(e.target)); break;
      default: break;
    }
  }

  // Runs the rank's list from its current position until a compute step starts or a receive blocks.
  void advance(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    const double now = engine_.now();
    while (R.pc < R.size) {
      const Step st = R.steps[R.pc];
      switch (st.kind) {
        case StepKind::Compute: {
          const ComputeCost& c = costs_[st.index];
          R.compute_start = now;
          if (c.allocates) {
            R.bytes += c.alloc;
            R.peak_bytes = std::max(R.peak_bytes, R.bytes);
            if (observer_) observer_->on_memory(r, now, R.bytes);
          }
          R.held += c.held_start;
          R.peak_held = std::max(R.peak_held, R.held);
          engine_.at(now + c.duration, kComputeDone, static_cast<std::uint32_t>(r));
          return;
        }
        case StepKind::Send:
          R.send.push(st.index);
          try_send(r);
          ++R.pc;
          break;
        case StepKind::Recv: {
          const Transfer& t = transfers_[st.index];
          if (!t.arrived) {
            R.blocked = true;
            R.wait_since = now;
            return;
          }
          if (observer_) emit(r, Lane::Recv, R.pc, now, now, t.bytes, st.index);
          ++R.pc;
          break;
        }
      }
    }
  }

  void compute_done(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    const ComputeCost& c = costs_[R.steps[R.pc].index];
    const double now = engine_.now();
    R.busy += c.duration;
    R.last_compute_end = now;
    if (c.frees) {
      R.bytes -= c.release;
      if (observer_) observer_->on_memory(r, now, R.bytes);
    }
    R.held += c.held_end;
    if (observer_) emit(r, Lane::Compute, R.pc, R.compute_start, now, 0, -1);
    if (c.grad_stage >= 0 && ++grad_count_[static_cast<std::size_t>(c.grad_stage)] == m_ &&
        in_.stages[static_cast<std::size_t>(c.grad_stage)].grad_reduce_s > 0) {
      R.collective.push(static_cast<std::uint32_t>(c.grad_stage));
      try_collective(r);
    }
    ++R.pc;
    advance(r);
  }

  void try_send(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    std::uint32_t id;
    if (!R.send.try_start(id)) return;
    Transfer& t = transfers_[id];
    t.start = engine_.now();
    R.p2p_sent += t.bytes;
    links_.start(engine_, t.link, t.bytes, kFlow, id);
  }

  void transfer_done(std::uint32_t id) {
    Transfer& t = transfers_[id];
    const double now = engine_.now();
    t.arrived = true;
    last_arrival_ = std::max(last_arrival_, now);
    if (observer_) emit(t.src, Lane::Send, t.send_step, t.start, now, t.bytes, id);
    ranks_[static_cast<std::size_t>(t.src)].send.finish();
    try_send(t.src);
    RankState& D = ranks_[static_cast<std::size_t>(t.dst)];
    if (D.blocked && D.pc == t.recv_step) {
      D.blocked = false;
      if (observer_) emit(t.dst, Lane::Recv, D.pc, std::max(D.wait_since, t.start), now, t.bytes, id);
      ++D.pc;
      advance(t.dst);
    }
  }

  void try_collective(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    std::uint32_t stage;
    if (!R.collective.try_start(stage)) return;
    R.collective_start = engine_.now();
    engine_.at(R.collective_start + in_.stages[stage].grad_reduce_s, kCollectiveDone, static_cast<std::uint32_t>(r));
  }

  void collective_done(int r) {
    RankState& R = ranks_[static_cast<std::size_t>(r)];
    const double now = engine_.now();
    R.collective_end = now;
    if (observer_) {
      SimEvent e;
      e.rank = r;
      e.lane = Lane::Collective;
      e.action = Action{Op::BW, static_cast<int>(R.collective.current()), -1};
      e.start_s = R.collective_start;
      e.end_s = now;
      observer_->on_event(e);
    }
    R.collective.finish();
    try_collective(r);
  }

  void emit(int r, Lane lane, std::uint32_t index, double start, double end, double bytes, long flow) {
    SimEvent e;
    e.rank = r;
    e.lane = lane;
    e.action = schedule_.ranks[static_cast<std::size_t>(r)][index];
    e.start_s = start;
    e.end_s = end;
    e.bytes = bytes;
    e.flow_id = flow;
    observer_->on_event(e);
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
    std::vector<double> optimizer(static_cast<std::size_t>(num_ranks_), 0.0);
    std::vector<double> state(static_cast<std::size_t>(num_ranks_), 0.0);
    for (int s = 0; s < num_stages_; ++s) {
      const auto r = static_cast<std::size_t>(schedule_.placement.rank_of(s));
      optimizer[r] += in_.stages[static_cast<std::size_t>(s)].optimizer_s;
      state[r] += in_.stages[static_cast<std::size_t>(s)].model_state_bytes;
    }
    double max_optimizer = 0;
    double async_end = 0;
    for (int r = 0; r < num_ranks_; ++r) {
      const RankState& R = ranks_[static_cast<std::size_t>(r)];
      out.pipeline_time_s = std::max(out.pipeline_time_s, R.last_compute_end);
      const double rank_end = std::max(R.last_compute_end, R.collective_end);
      flush_end = std::max(flush_end, rank_end);
      max_optimizer = std::max(max_optimizer, optimizer[static_cast<std::size_t>(r)]);
      async_end = std::max(async_end, rank_end + optimizer[static_cast<std::size_t>(r)]);
    }
    // Synchronous: every rank waits for the whole flush (the global gradient norm) before stepping.
    out.step_time_s = in_.synchronous_optimizer ? flush_end + max_optimizer : std::max(async_end, flush_end);
    double idle = 0;
    for (int r = 0; r < num_ranks_; ++r) {
      const RankState& R = ranks_[static_cast<std::size_t>(r)];
      RankStats st;
      st.rank = r;
      st.busy_s = R.busy;
      st.idle_s = out.step_time_s - R.busy;
      st.activation_peak_bytes = R.peak_bytes;
      st.model_state_bytes = state[static_cast<std::size_t>(r)];
      st.peak_memory_bytes = st.model_state_bytes + st.activation_peak_bytes;
      st.peak_inflight_microbatches = R.peak_held;
      st.p2p_bytes_sent = R.p2p_sent;
      idle += st.idle_s;
      out.ranks.push_back(st);
    }
    out.bubble_fraction = out.step_time_s > 0 ? idle / (num_ranks_ * out.step_time_s) : 0;
    out.actions = static_cast<long>(steps_.size());
    if (observer_) observer_->on_finish(out.step_time_s);
    return out;
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
  std::vector<Step> steps_;
  std::vector<int> pair_link_;                 // src rank * ranks + dst rank -> link
  std::map<std::pair<int, int>, int> gpu_link_;  // (GPU, GPU) -> link
  std::vector<Transfer> transfers_;
  std::vector<RankState> ranks_;
  std::vector<int> grad_count_;
  double last_arrival_ = 0;
  Engine engine_;
  FluidLinks links_;
};

}  // namespace

SimResult simulate(const SimInput& in, SimObserver* observer) {
  if (in.schedule.lowered) return PipelineSimulation(in, in.schedule, observer).run();
  const Schedule lowered = lower(in.schedule);
  return PipelineSimulation(in, lowered, observer).run();
}

}  // namespace pw
