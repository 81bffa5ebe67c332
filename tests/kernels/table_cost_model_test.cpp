// The table-priced cost model (kernels/table_cost_model.hpp): each phase's dense GEMMs from the tables in place
// of the analytic model's, on the tables' GPU only, and what it priced.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>

#include "../temp_folder.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/layer_work.hpp"
#include "core/model.hpp"
#include "kernels/table_cost_model.hpp"

using namespace pw;

namespace {

constexpr double kPowerLawC = 1e-15;  // a table's seconds per m n k (t = c m n k: exact between its points)

// An h200_sxm folder whose bfloat16 GEMMs follow t = c m n k on every power of two from 1 to 65536.
std::shared_ptr<KernelTables> power_law_tables() {
  const auto dir = fresh_folder("table_cost_model");
  nlohmann::json rows = nlohmann::json::array();
  for (int a = 0; a <= 16; ++a)
    for (int b = 0; b <= 16; ++b)
      for (int c = 0; c <= 16; ++c) {
        const double m = 1 << a, n = 1 << b, k = 1 << c;
        rows.push_back({"bfloat16", m, n, k, kPowerLawC * m * n * k});
      }
  const long count = static_cast<long>(rows.size());
  std::ofstream(dir / "gemm_perf.json") << nlohmann::json{{"format", "pipewright-kernel-table"},
                                                          {"format_version", 1},
                                                          {"kind", "gemm_perf"},
                                                          {"keys", {"gemm_dtype", "m", "n", "k"}},
                                                          {"times", {"time_s"}},
                                                          {"rows", rows}}
                                                  .dump();
  std::ofstream(dir / "manifest.json") << nlohmann::json{{"format", "pipewright-kernel-table"},
                                                         {"format_version", 1},
                                                         {"system", "h200_sxm"},
                                                         {"software", "test"},
                                                         {"tables", {{{"kind", "gemm_perf"},
                                                                      {"file", "gemm_perf.json"},
                                                                      {"rows", count}}}}}
                                              .dump();
  return KernelTables::open(dir.string());
}

Workload long_sequences(int tp) {
  Workload w;
  w.micro_batch_size = 2;
  w.seq_len = 4096;
  w.tp = tp;
  return w;
}

}  // namespace

TEST_CASE("a GPU matches the tables of its chip and form factor", "[kernels]") {
  CHECK(gpu_matches_system("H200 SXM 141GB", "h200_sxm"));
  CHECK(gpu_matches_system("H100 SXM 80GB", "h100_sxm"));
  CHECK(gpu_matches_system("B200 180GB", "b200_sxm"));
  CHECK(gpu_matches_system("A100 SXM 80GB", "a100_sxm"));
  CHECK(!gpu_matches_system("H100 SXM 80GB", "h200_sxm"));
  CHECK(!gpu_matches_system("H100 SXM 80GB", "h100_pcie"));
  CHECK(!gpu_matches_system("H800 SXM 80GB", "h100_sxm"));
  CHECK(!gpu_matches_system("ideal (H100 SXM peak)", "h100_sxm"));
  CHECK(!gpu_matches_system("B200 (GB200) 186GB", "gb200"));
}

TEST_CASE("each phase's GEMMs are the tables' times in place of the analytic model's", "[kernels]") {
  const AnalyticCostParams params;
  const AnalyticCostModel analytic(params);
  const TableCostModel tables(analytic, power_law_tables());
  const Cluster h200 = cluster_preset("hgx-h200");
  const Model m = model_preset("llama3-70b");
  const Layer& block = m.layers[m.block_index(0)];
  for (int tp : {1, 8}) {
    const LayerWork work = layer_work(m, block, long_sequences(tp));
    for (Phase phase : {Phase::Forward, Phase::BackwardInput, Phase::BackwardWeight}) {
      const PhaseWork& p = phase == Phase::Forward         ? work.forward
                           : phase == Phase::BackwardInput ? work.backward_input
                                                           : work.backward_weight;
      double table = 0, flops = 0;
      for (const GemmShape& g : p.gemms) {
        table += kPowerLawC * g.m * g.n * g.k;
        flops += g.flops();
      }
      // The analytic model's share of those GEMMs: their FLOPs at its GEMM rate and a launch each.
      const double analytic_gemms = flops / (h200.gpu.peak_flops * params.gemm_efficiency) +
                                    static_cast<double>(p.gemms.size()) * params.kernel_overhead_s;
      const double without = analytic.phase_time(block, work, phase, h200.gpu, h200.intra_node, tp);
      const double with = tables.phase_time(block, work, phase, h200.gpu, h200.intra_node, tp);
      INFO("tp " << tp << " phase " << static_cast<int>(phase));
      CHECK(p.gemms.size() == 4);
      CHECK(with == Approx(without - analytic_gemms + table).epsilon(1e-9));
    }
  }
  const TableCostModel::Share s = tables.share();
  CHECK(s.missing == 0);
  CHECK(s.extrapolated == 0);
  CHECK(s.table_s > 0);
  CHECK(s.other_gpu_s == 0);
}

TEST_CASE("another GPU, a layer without GEMMs and a shape past the tables keep the model's time", "[kernels]") {
  const AnalyticCostModel analytic;
  const TableCostModel tables(analytic, power_law_tables());
  const Model m = model_preset("llama3-70b");
  const Layer& block = m.layers[m.block_index(0)];
  const LayerWork work = layer_work(m, block, long_sequences(1));
  const Cluster h100 = cluster_preset("dgx-h100");
  CHECK(tables.phase_time(block, work, Phase::Forward, h100.gpu, h100.intra_node, 1) ==
        analytic.phase_time(block, work, Phase::Forward, h100.gpu, h100.intra_node, 1));
  CHECK(tables.share().other_gpu_s > 0);
  // 2 x 65536 tokens: m past the largest measured (65536) by 2x is still read; 4 x 65536 is not.
  const Cluster h200 = cluster_preset("hgx-h200");
  Workload huge = long_sequences(1);
  huge.micro_batch_size = 4;
  huge.seq_len = 65536;
  const LayerWork far = layer_work(m, block, huge);
  CHECK(tables.phase_time(block, far, Phase::Forward, h200.gpu, h200.intra_node, 1) ==
        analytic.phase_time(block, far, Phase::Forward, h200.gpu, h200.intra_node, 1));
  const TableCostModel::Share s = tables.share();
  CHECK(s.missing > 0);
  CHECK(s.first_missing.rfind("bf16 GEMM m 262144, n ", 0) == 0);
}
