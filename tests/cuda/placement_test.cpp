// Which GPU each rank uses, the transport between them, and the numerical check's arithmetic and text.
#include <catch2/catch.hpp>

#include "../error_text.hpp"
#include "executor/cuda/host/cuda_api.hpp"
#include "executor/cuda/host/gpu_placement.hpp"
#include "executor/cuda/host/numerical_check.hpp"

using namespace pw;

TEST_CASE("ranks go round the GPUs, sharing a GPU means the local transport", "[cuda][host]") {
  const GpuPlacement one = place_ranks(4, 1, "auto");
  CHECK(one.device_of_rank == std::vector<int>{0, 0, 0, 0});
  CHECK(one.local_transport);
  CHECK(placement_text(one, 1) == "4 ranks on 1 GPU, local transport (device-to-device copies)");
  const GpuPlacement eight = place_ranks(4, 8, "auto");
  CHECK(eight.device_of_rank == std::vector<int>{0, 1, 2, 3});
  CHECK_FALSE(eight.local_transport);
  CHECK(placement_text(eight, 8) == "4 ranks on 4 GPUs, NCCL");
  CHECK(place_ranks(4, 2, "auto").device_of_rank == std::vector<int>{0, 1, 0, 1});
  CHECK(place_ranks(2, 2, "local").local_transport);
  CHECK(bad_input([] { place_ranks(4, 2, "nccl"); }) ==
        "--transport: nccl needs a GPU per rank (NCCL refuses two ranks on one GPU); 4 ranks, 2 GPUs; use --transport "
        "local or auto");
  CHECK(bad_input([] { place_ranks(2, 1, "gloo"); }) == "--transport: must be auto, nccl or local, got 'gloo'");
}

TEST_CASE("norm-wise relative error", "[cuda][host]") {
  // ||(1, 2.02) - (1, 2)|| / ||(1, 2)|| = 0.02 / sqrt(5).
  CHECK(relative_error({1.0f, 2.02f}, {1.0f, 2.0f}, "x") == Approx(0.02 / std::sqrt(5.0)).epsilon(1e-5));
  CHECK(relative_error({0.0f, 0.0f}, {0.0f, 0.0f}, "x") == 0.0);
  CHECK(relative_error({3.0f, 4.0f}, {0.0f, 0.0f}, "x") == Approx(5.0));  // against zeros: the GPU's norm
  CHECK(bad_input([] { relative_error({1.0f}, {1.0f, 2.0f}, "grad head.lm.w"); }) ==
        "numerical check: grad head.lm.w has 1 values on the GPU and 2 on the CPU");
}

TEST_CASE("the numerical check passes when every item is within its tolerance", "[cuda][host]") {
  CHECK(check_tolerance("bf16") == 2e-2);
  CHECK(check_tolerance("fp32") == 1e-4);
  CHECK(bad_input([] { check_tolerance("fp16"); }) == "--dtype: must be bf16 or fp32, got 'fp16'");
  NumericalCheck c;
  c.dtype = "fp32";
  c.tolerance = 1e-4;
  CHECK_FALSE(c.passed());  // nothing compared proves nothing
  c.items.push_back({"loss", 3e-6, 1});
  c.items.push_back({"grad block1.qkv.w", 2.5e-5, 1536});
  CHECK(c.passed());
  c.items.push_back({"grad head.lm.w", 3e-4, 16384});
  CHECK_FALSE(c.passed());
  CHECK(c.table() ==
        "  ok    3.0e-06  loss (1 values)\n"
        "  ok    2.5e-05  grad block1.qkv.w (1536 values)\n"
        "  FAIL  3.0e-04  grad head.lm.w (16384 values)\n"
        "numerical check (fp32, tolerance 0.0001): 2 of 3 within tolerance\n");
}

TEST_CASE("dtype names", "[cuda][host]") {
  CHECK(dtype_from_text("bf16") == DType::BF16);
  CHECK(dtype_from_text("fp32") == DType::F32);
  CHECK(dtype_bytes(DType::BF16) == 2);
  CHECK(std::string(to_string(DType::F32)) == "fp32");
  CHECK(bad_input([] { dtype_from_text("half"); }) == "--dtype: must be bf16 or fp32, got 'half'");
}
