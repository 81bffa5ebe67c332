#pragma once
// Inputs shared by the simulator tests: uniform stage costs, the ideal cluster, one-link clusters.
#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "core/stage_costs.hpp"
#include "schedules/generators.hpp"
#include "schedules/ir.hpp"
#include "sim/pipeline_sim.hpp"

namespace pw::test {

inline std::vector<StageCost> uniform_costs(int stages, double f, double b, double w, double activation_bytes = 0,
                                            double weight_grad_bytes = 0, double output_bytes = 0) {
  StageCost c;
  c.forward_s = f;
  c.backward_input_s = b;
  c.backward_weight_s = w;
  c.activation_bytes = activation_bytes;
  c.weight_grad_bytes = weight_grad_bytes;
  c.output_bytes = output_bytes;
  return std::vector<StageCost>(static_cast<size_t>(stages), c);
}

inline Cluster ideal_cluster() {
  Cluster c;
  c.name = "ideal";
  c.ideal = true;
  return c;
}

// Every GPU in one node, joined by links of the given bandwidth and latency.
inline Cluster one_node_cluster(double bandwidth_bytes_per_s, double latency_s) {
  Cluster c;
  c.name = "test-node";
  c.nodes = 1;
  c.gpus_per_node = 64;
  c.intra_node = LinkSpec{bandwidth_bytes_per_s, latency_s};
  c.inter_node = LinkSpec{bandwidth_bytes_per_s, latency_s};
  return c;
}

inline Schedule generated(const std::string& name, int p, int m, int v = 1) {
  ScheduleSpec spec;
  spec.name = name;
  spec.ranks = p;
  spec.microbatches = m;
  spec.chunks = v;
  return make_schedule(spec);
}

inline SimInput sim_input(Schedule s, std::vector<StageCost> costs, Cluster cluster) {
  SimInput in;
  in.schedule = std::move(s);
  in.stages = std::move(costs);
  in.cluster = std::move(cluster);
  return in;
}

// A hand-written schedule: placement stage s -> stage_rank[s], lists in text form ("0F0", "0SEND_F0").
inline Schedule hand_schedule(int microbatches, std::vector<int> stage_rank,
                              const std::vector<std::vector<std::string>>& lists, bool lowered) {
  Schedule s;
  s.name = "hand";
  s.microbatches = microbatches;
  s.placement.kind = PlacementKind::Explicit;
  s.placement.stage_rank = std::move(stage_rank);
  s.placement.ranks = static_cast<int>(lists.size());
  for (const auto& list : lists) {
    std::vector<Action> actions;
    for (const auto& text : list) actions.push_back(action_from_text(text));
    s.ranks.push_back(std::move(actions));
  }
  s.lowered = lowered;
  return s;
}

// Keeps every event and memory sample in the order the simulator reports them.
class Recorder : public SimObserver {
 public:
  struct MemorySample {
    int rank = 0;
    double time_s = 0;
    double bytes_in_use = 0;
    friend bool operator==(const MemorySample&, const MemorySample&) = default;
  };
  void on_start(int ranks) override {
    ranks_ = ranks;
    ++starts_;
  }
  void on_event(const SimEvent& e) override { events_.push_back(e); }
  void on_memory(int rank, double time_s, double bytes_in_use) override {
    memory_.push_back({rank, time_s, bytes_in_use});
  }
  void on_finish(double step_time_s) override {
    step_time_s_ = step_time_s;
    ++finishes_;
  }
  const std::vector<SimEvent>& events() const { return events_; }
  const std::vector<MemorySample>& memory() const { return memory_; }
  int ranks() const { return ranks_; }
  int starts() const { return starts_; }
  int finishes() const { return finishes_; }
  double step_time_s() const { return step_time_s_; }

 private:
  std::vector<SimEvent> events_;
  std::vector<MemorySample> memory_;
  int ranks_ = 0, starts_ = 0, finishes_ = 0;
  double step_time_s_ = 0;
};

}  // namespace pw::test
