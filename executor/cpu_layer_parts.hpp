#pragma once
// The pieces the CPU layers are built of: parameters with their initial values, norms, linear maps, and the
// MLP a block ends with (a dense one, or routed experts: executor/cpu_moe_mlp.hpp).
#include <memory>
#include <string>
#include <vector>

#include "core/model.hpp"
#include "executor/backend.hpp"
#include "executor/cpu_layers.hpp"
#include "executor/cpu_ops.hpp"

namespace pw::cpu {

inline constexpr double kInitStd = 0.02;

// A matrix from N(0, kInitStd) drawn from `seed` and the name (`random`), or filled with `fill`.
Param make_param(const std::string& name, Eigen::Index rows, Eigen::Index cols, double fill, std::uint64_t seed,
                 bool random);

// A norm's scale (and, for LayerNorm, shift).
struct Norm {
  NormKind kind = NormKind::LayerNorm;
  Param gamma, beta;

  Norm(const std::string& name, NormKind k, int h, std::uint64_t seed);
  bool has_beta() const { return kind == NormKind::LayerNorm; }
  Mat forward(const Mat& x, Mat& xhat, Mat& rstd) const;
  Mat backward_input(const Mat& dy, const Mat& xhat, const Mat& rstd) const;
  WeightGradTerm term(Mat&& xhat, Mat dy);
  void collect(std::vector<Param*>& out);
};

struct Linear {
  Param w, b;
  bool bias = false;

  Linear(const std::string& name, int in, int out, bool with_bias, std::uint64_t seed);
  Mat forward(const Mat& x) const { return ops::linear_forward(x, w.value, bias ? &b.value : nullptr); }
  Mat backward_input(const Mat& dy) const { return ops::linear_backward_input(dy, w.value); }
  WeightGradTerm term(Mat&& x, Mat dy);
  void collect(std::vector<Param*>& out);
};

// The MLP part of a block: from the normalised input n to what is added to the residual.
class CpuMlp {
 public:
  virtual ~CpuMlp() = default;
  // How many matrices F keeps for B (the block gives them room in its saved slots).
  virtual int slots() const = 0;
  virtual Mat forward(const Mat& n, Mat* saved) = 0;
  // Returns the gradient of n; `n` is F's input, which the weight-gradient terms may take.
  virtual Mat backward(const Mat& dy, Mat& n, Mat* saved, const GradSink& sink) = 0;
  virtual void collect(std::vector<Param*>& out) = 0;
  // The exchange with the other replicas' experts (routed experts over ep replicas only).
  virtual void connect(Collectives*) {}
};

// up, the activation (`mlp`: GELU, or SwiGLU on an up projection twice as wide), down.
class DenseMlp : public CpuMlp {
 public:
  DenseMlp(const std::string& name, int hidden, int ffn, MlpKind mlp, bool bias, std::uint64_t seed);
  int slots() const override { return kSlots; }
  Mat forward(const Mat& n, Mat* saved) override;
  Mat backward(const Mat& dy, Mat& n, Mat* saved, const GradSink& sink) override;
  void collect(std::vector<Param*>& out) override;

 private:
  enum Slot { kU, kG, kSlots };
  MlpKind mlp_;
  Linear up_, down_;
};

// The activation between up and down, and its backward.
Mat activation(MlpKind mlp, const Mat& u);
Mat activation_backward(MlpKind mlp, const Mat& u, const Mat& dg);

}  // namespace pw::cpu
