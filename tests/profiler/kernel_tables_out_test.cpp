// What `profile --kernels-out` measures and how its tables are named: the model's distinct GEMM shapes, the
// CPU sweep as a gemm_perf table, a device's chip as the tables' system.
#include <catch2/catch.hpp>

#include <set>
#include <tuple>

#include "core/model.hpp"
#include "profiler/cpu_gemm_table.hpp"
#include "profiler/cuda/host/cuda_profiler_api.hpp"
#include "profiler/model_gemms.hpp"

using namespace pw;

TEST_CASE("the GEMM shapes a model runs are every layer's F, B and W GEMMs, each once", "[profiler]") {
  const Model m = model_preset("llama3-8b");
  const std::vector<GemmShape> shapes = model_gemm_shapes(m, {1, 2}, 4096);
  std::set<std::tuple<double, double, double>> expected;
  for (int b : {1, 2}) {
    Workload w;
    w.micro_batch_size = b;
    w.seq_len = 4096;
    for (const Layer& l : m.layers) {
      const LayerWork work = layer_work(m, l, w);
      for (const PhaseWork* p : {&work.forward, &work.backward_input, &work.backward_weight})
        for (const GemmShape& g : p->gemms) expected.emplace(g.m, g.n, g.k);
    }
  }
  std::set<std::tuple<double, double, double>> got;
  for (const GemmShape& g : shapes) got.emplace(g.m, g.n, g.k);
  CHECK(got == expected);
  CHECK(shapes.size() == expected.size());  // no shape twice
  // A block's 4 GEMMs in F, 4 in B, 4 in W and the head's 3, at two token counts, some alike.
  CHECK(shapes.front().m == 4096);
}

TEST_CASE("the CPU sweep writes one gemm_perf row a shape, in float32", "[profiler]") {
  const std::vector<GemmShape> shapes{{64, 32, 16, false}, {8, 8, 8, false}};
  ProfileOptions fast;
  fast.warmup = 1;
  fast.min_repetitions = 2;
  fast.min_time_s = 0;
  fast.rounds = 1;
  const KernelTableOut t = time_cpu_gemms(shapes, fast);
  CHECK(t.kind == "gemm_perf");
  CHECK(t.keys == std::vector<std::string>{"gemm_dtype", "m", "n", "k"});
  REQUIRE(t.rows.size() == 2);
  CHECK(t.rows[0][0] == "float32");
  CHECK((t.rows[0][1] == 64 && t.rows[0][2] == 16 && t.rows[0][3] == 32));  // m, n, k
  CHECK(t.rows[1][4].get<double>() > 0);
  const WorkEstimate e = cpu_gemm_sweep_estimate(shapes, fast, CoreSpeed{1e9, 1e6});
  // (2 x 64 x 32 x 16 + 2 x 8^3) FLOPs x (1 warm-up + 1 round + 2 timed) at 1 GFLOP/s.
  CHECK(e.seconds == Approx((2.0 * 64 * 32 * 16 + 2.0 * 512) * 4 / 1e9));
  CHECK(e.bytes == 4 * ((64.0 * 16 + 16 * 32 + 64 * 32) + 3 * 64.0));
}

TEST_CASE("a device's chip names its tables' system", "[profiler]") {
  CHECK(chip_of_device("NVIDIA H200") == "h200");
  CHECK(chip_of_device("NVIDIA H100 80GB HBM3") == "h100");
  CHECK(chip_of_device("NVIDIA A100-SXM4-80GB") == "a100");
  CHECK(chip_of_device("NVIDIA GeForce RTX 4090") == "rtx4090");
  CHECK(chip_of_device("NVIDIA B200") == "b200");
  CHECK(chip_of_device("") == "gpu");
}
