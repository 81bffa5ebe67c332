#pragma once
// Float32 matrices, parameters and a portable random source for the CPU backend. Activations are
// (tokens x features) row-major matrices: row r is token r % s of sequence r / s of a micro-batch.
#include <Eigen/Core>

#include <cstdint>
#include <string>
#include <string_view>

namespace pw {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

inline double bytes_of(const Mat& m) { return 4.0 * static_cast<double>(m.size()); }

// A trainable tensor with its accumulated gradient and (once Adam has stepped) its two moments.
struct Param {
  std::string name;
  Mat value;
  Mat grad;
  Mat adam_m;
  Mat adam_v;
  int steps = 0;  // optimizer steps taken (Adam's bias correction)
  // A routed expert's: data-parallel replicas reduce its gradient over the expert-data-parallel group (the
  // replicas holding the same experts) instead of all of them.
  bool expert = false;
};

// SplitMix64 with a Box-Muller normal: the same numbers on every platform and standard library
// (std::normal_distribution is implementation-defined).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  double uniform();  // [0, 1)
  double normal();   // mean 0, standard deviation 1

 private:
  std::uint64_t state_;
};

// A rows x cols matrix of N(0, 1) draws from `seed`: inputs for timing a layer.
Mat random_matrix(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed);

// FNV-1a of a name mixed with a seed: each parameter draws its own stream, so its initial values do not
// depend on which other layers exist or which stage holds it.
std::uint64_t seed_for(std::uint64_t seed, std::string_view name);

}  // namespace pw
