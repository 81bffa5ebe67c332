#pragma once
// A mixture-of-experts MLP on the CPU, as Megatron-Core computes it by default: a router (one linear map to
// the E experts' logits) picks each token's top k experts, the token's weights are the softmax over those
// k logits; each chosen expert (a small MLP, gated or not, with or without biases) computes on the token
// and the outputs are added up by the weights; shared experts (optionally scaled by a sigmoid gate, as in
// Qwen2-MoE) compute on every token. Dropless: every expert takes every token sent to it. No auxiliary
// load-balancing loss (Megatron's coefficient defaults to 0).
//
// Expert parallelism over ep replicas: replica i of an ep group holds experts [i E/ep, (i+1) E/ep).
// Forward sends each (token, choice) to the replica holding its expert and the outputs back (the dispatch
// and combine all-to-alls); backward sends the output gradients the same way and the input gradients
// back. The rows every replica sends are in (token, choice) order, so each end knows what it gets.
#include <memory>
#include <string>
#include <vector>

#include "core/moe.hpp"
#include "executor/cpu_layer_parts.hpp"

namespace pw::cpu {

class MoeMlp : public CpuMlp {
 public:
  MoeMlp(const std::string& name, const TransformerConfig& c, const ExpertShard& shard, std::uint64_t seed);
  int slots() const override { return kSlots; }
  Mat forward(const Mat& n, Mat* saved) override;
  Mat backward(const Mat& dy, Mat& n, Mat* saved, const GradSink& sink) override;
  void collect(std::vector<Param*>& out) override;
  void connect(Collectives* collectives) override { collectives_ = collectives; }

 private:
  enum Slot {
    kChoice,      // T x k: each token's experts (as floats: exact below 2^24)
    kWeight,      // T x k: their weights
    kOut,         // T k x h: each choice's expert output, in (token, choice) order
    kRecvExpert,  // R x 1: the local expert of every row received, by source then row
    kRecvCount,   // ep x 1: the rows received from each member
    kX,           // R x h: the received rows, by local expert
    kU,           // R x up: the experts' up projections, by local expert
    kG,           // R x f: their activations
    kSharedU,
    kSharedG,
    kSharedOut,
    kGate,        // T x 1: the shared experts' sigmoid gate
    kSlots
  };

  struct Expert {
    Linear up, down;
  };

  // Where each (token, choice) c = t k + j goes: its expert's member of the ep group, its row in the part sent
  // there (rows in (token, choice) order), and the rows each member gets.
  struct Routes {
    std::vector<size_t> member;
    std::vector<Eigen::Index> row;
    std::vector<Eigen::Index> count;
    std::vector<Mat> parts(Eigen::Index cols) const;  // one empty part per member, sized for its rows
  };
  Routes route(const Mat& choice) const;
  // Sends parts[i] to member i of the ep group; returns what each sent here.
  std::vector<Mat> exchange(std::vector<Mat> parts);
  // The rows of `recv_expert` in local-expert order: order[e] lists the received rows of local expert e.
  std::vector<std::vector<Eigen::Index>> rows_by_expert(const Mat& recv_expert) const;

  MoeConfig moe_;
  MlpKind mlp_;
  int hidden_;
  ExpertShard shard_;
  int local_ = 0;  // experts held here
  Linear router_;
  std::vector<Expert> experts_;
  std::unique_ptr<DenseMlp> shared_;
  std::unique_ptr<Linear> gate_;
  Collectives* collectives_ = nullptr;
};

}  // namespace pw::cpu
