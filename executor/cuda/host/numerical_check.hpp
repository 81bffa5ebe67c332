#pragma once
// The numerical check of the GPU layers against the CPU backend: which tensors, how they are compared and
// how the result reads.
#include <string>
#include <vector>

namespace pw {

// ||gpu - cpu|| / ||cpu|| over all elements (Euclidean norms), ||gpu|| when the CPU tensor is all zeros.
// Element-wise relative errors would blow up on the many values near zero; a norm-wise error is what
// "within 2e-2" can hold a low-precision kernel to. BadInput when the sizes differ.
double relative_error(const std::vector<float>& gpu, const std::vector<float>& cpu, const std::string& name);

struct NumericalCheck {
  struct Item {
    std::string name;  // "stage 0 output", "loss", "grad block1.qkv.w", ...
    double relative_error = 0;
    long elements = 0;
  };
  std::string dtype;  // "bf16" or "fp32"
  double tolerance = 0;
  std::vector<Item> items;

  bool passed() const;
  // One line per item ("  ok    2.1e-03  grad block1.qkv.w (1536 values)", FAIL where over the tolerance),
  // then "numerical check (<dtype>, tolerance <t>): <n> of <m> within tolerance".
  std::string table() const;
};

// 2e-2 for bf16, 1e-4 for fp32 (BadInput for another name).
double check_tolerance(const std::string& dtype);

}  // namespace pw
