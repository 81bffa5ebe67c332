// The table-priced cost model (kernels/table_cost_model.hpp): each phase's dense GEMMs from the tables in place
// of the analytic model's, on the tables' GPU only, and what it priced.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "../temp_folder.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/expert_parallel.hpp"
#include "core/layer_work.hpp"
#include "core/model.hpp"
#include "core/serving_work.hpp"
#include "serving/dp_attention_serving.hpp"
#include "serving/serving_sim.hpp"
#include "kernels/table_cost_model.hpp"

using namespace pw;

namespace {

constexpr double kPowerLawC = 1e-15;    // a table's GEMM seconds per m n k (t = c m n k: exact between its points)
constexpr double kAttentionC = 1e-13;   // attention seconds per batch x sequence^2 x heads
constexpr double kCollectiveC = 1e-11;  // collective seconds per element (any op, any GPU count)

nlohmann::json table(const char* kind, const std::vector<std::string>& keys, const nlohmann::json& rows) {
  return {{"format", "pipewright-kernel-table"}, {"format_version", 1}, {"kind", kind},
          {"keys", keys},                        {"times", {"time_s"}},  {"rows", rows}};
}

// An h200_sxm folder whose bfloat16 GEMMs follow t = c m n k on every power of two from 1 to 65536; with
// `more`, also bf16 context attention of 8 kv heads of 128 (t = c b s^2 heads, powers of two) and NCCL
// collectives of 2 to 8 GPUs (t = c elements, powers of two up to 2^30).
// `name`: a folder of this test case's own (ctest runs test cases side by side, and a table is read when first
// asked, so a folder another case remakes meanwhile would be gone).
std::shared_ptr<KernelTables> power_law_tables(const std::string& name, bool more = false) {
  const auto dir = fresh_folder(name);
  nlohmann::json rows = nlohmann::json::array();
  for (int a = 0; a <= 16; ++a)
    for (int b = 0; b <= 16; ++b)
      for (int c = 0; c <= 16; ++c) {
        const double m = 1 << a, n = 1 << b, k = 1 << c;
        rows.push_back({"bfloat16", m, n, k, kPowerLawC * m * n * k});
      }
  nlohmann::json listed = nlohmann::json::array();
  const auto add = [&](const char* kind, const nlohmann::json& t) {
    std::ofstream(dir / (std::string(kind) + ".json")) << t.dump();
    listed.push_back({{"kind", kind}, {"file", std::string(kind) + ".json"}, {"rows", t.at("rows").size()}});
  };
  add("gemm_perf", table("gemm_perf", {"gemm_dtype", "m", "n", "k"}, rows));
  if (more) {
    nlohmann::json attention = nlohmann::json::array();
    for (int b = 0; b <= 4; ++b)
      for (int s = 10; s <= 15; ++s)
        for (int h = 3; h <= 7; ++h)
          attention.push_back({"bfloat16", "bfloat16", 128, 8, 0, 1, 1 << b, 1 << s, 1 << h,
                               kAttentionC * (1 << b) * std::pow(2.0, 2 * s) * (1 << h)});
    add("context_attention_perf",
        table("context_attention_perf",
              {"attn_dtype", "kv_cache_dtype", "head_dim", "num_key_value_heads", "window_size", "beam_width",
               "batch_size", "isl", "num_heads"},
              attention));
    nlohmann::json nccl = nlohmann::json::array();
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "alltoall"})
      for (int gpus : {2, 4, 8})
        for (int e = 10; e <= 30; ++e) nccl.push_back({op, "half", gpus, 1 << e, kCollectiveC * (1 << e)});
    add("nccl_perf", table("nccl_perf", {"op_name", "nccl_dtype", "num_gpus", "message_size"}, nccl));
  }
  std::ofstream(dir / "manifest.json") << nlohmann::json{{"format", "pipewright-kernel-table"},
                                                         {"format_version", 1},
                                                         {"system", "h200_sxm"},
                                                         {"software", "test"},
                                                         {"tables", listed}}
                                              .dump();
  return KernelTables::open(dir.string());
}

// A serving step of 16 decodes of 1,000 tokens in cache each.
ServingBatch sixteen_decodes() {
  ServingBatch batch;
  batch.decode_tokens = 16;
  batch.decode_context = 16 * 1000.0;
  batch.sampled_tokens = 16;
  return batch;
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
  CHECK(gpu_matches_system("B200 (GB200) 186GB", "gb200"));
  CHECK(!gpu_matches_system("B200 (GB200) 186GB", "b200_sxm"));
}

TEST_CASE("tables measured on an A100 of 80 GB do not price one of 40 GB", "[kernels]") {
  const auto dir = fresh_folder("table_a100_gpu");
  std::ofstream(dir / "manifest.json") << nlohmann::json{{"format", "pipewright-kernel-table"},
                                                         {"format_version", 1},
                                                         {"system", "a100_sxm"},
                                                         {"software", "test"},
                                                         {"gpu", {{"hbm_bytes_per_s", 2.039e12}}},
                                                         {"tables", nlohmann::json::array()}}
                                              .dump();
  const auto tables = KernelTables::open(dir.string());
  CHECK(measured_on(cluster_preset("dgx-a100-80gb").gpu, *tables));
  CHECK(!measured_on(cluster_preset("dgx-a100-40gb").gpu, *tables));  // 1.555 TB/s, 24% less
  CHECK(!measured_on(cluster_preset("dgx-h100").gpu, *tables));
}

TEST_CASE("each phase's GEMMs are the tables' times in place of the analytic model's", "[kernels]") {
  const AnalyticCostParams params;
  const AnalyticCostModel analytic(params);
  const TableCostModel tables(analytic, power_law_tables("table_cost_model_phases"));
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
  CHECK(s.gemms.missing == 0);
  CHECK(s.gemms.extrapolated == 0);
  CHECK(s.gemm_s > 0);
  CHECK(s.attention_s == 0);  // no attention table: the model's
  CHECK(s.other_gpu_s == 0);
}

TEST_CASE("another GPU, a layer without GEMMs and a shape past the tables keep the model's time", "[kernels]") {
  const AnalyticCostModel analytic;
  const TableCostModel tables(analytic, power_law_tables("table_cost_model_other_gpu"));
  const Model m = model_preset("llama3-70b");
  const Layer& block = m.layers[m.block_index(0)];
  const LayerWork work = layer_work(m, block, long_sequences(1));
  const Cluster h100 = cluster_preset("dgx-h100");
  CHECK(tables.phase_time(block, work, Phase::Forward, h100.gpu, h100.intra_node, 1) ==
        analytic.phase_time(block, work, Phase::Forward, h100.gpu, h100.intra_node, 1));
  CHECK(tables.share().other_gpu_s > 0);
  // 4 x 65536 tokens, past the largest m measured (65536) by 4x: read as 4 slices, exact for a power law.
  const Cluster h200 = cluster_preset("hgx-h200");
  Workload huge = long_sequences(1);
  huge.micro_batch_size = 4;
  huge.seq_len = 65536;
  const LayerWork far = layer_work(m, block, huge);
  const AnalyticCostParams params;
  double table = 0, flops = 0;
  for (const GemmShape& g : far.forward.gemms) {
    table += kPowerLawC * g.m * g.n * g.k;
    flops += g.flops();
  }
  CHECK(tables.phase_time(block, far, Phase::Forward, h200.gpu, h200.intra_node, 1) ==
        Approx(analytic.phase_time(block, far, Phase::Forward, h200.gpu, h200.intra_node, 1) -
               flops / (h200.gpu.peak_flops * params.gemm_efficiency) -
               static_cast<double>(far.forward.gemms.size()) * params.kernel_overhead_s + table)
            .epsilon(1e-9));
  CHECK(tables.share().gemms.extrapolated > 0);
  // fp8 GEMMs, which the tables lack: the model's.
  Workload fp8 = long_sequences(1);
  fp8.precision = Precision::Fp8;
  const LayerWork in_fp8 = layer_work(m, block, fp8);
  CHECK(tables.phase_time(block, in_fp8, Phase::Forward, h200.gpu, h200.intra_node, 1) ==
        analytic.phase_time(block, in_fp8, Phase::Forward, h200.gpu, h200.intra_node, 1));
  const TableCostModel::Share s = tables.share();
  CHECK(s.gemms.missing == 4);
  // Each distinct shape the tables lacked, once, in the order first asked; a kind the folder has no table of is
  // not asked, and named.
  CHECK(s.attentions.asked() == 0);
  CHECK(s.absent == std::vector<std::string>{"context_attention_perf"});
  REQUIRE(s.missing.size() == 4);
  CHECK(s.missing[0] == "fp8 GEMM m 8192, n 10240, k 8192 in " + block.name + ": gemm_perf: no fp8 rows");
}

TEST_CASE("the fused attention forward and the tp collectives within a node are the tables' too", "[kernels]") {
  AnalyticCostParams params;
  params.tp_overlap = 0.25;  // the tables' collectives exposed in the model's share
  const AnalyticCostModel analytic(params);
  const TableCostModel tables(analytic, power_law_tables("table_cost_model_attention", true));
  const Cluster h200 = cluster_preset("hgx-h200");
  const Model m = model_preset("llama3-70b");  // 64 heads, 8 kv heads of 128
  const Layer& block = m.layers[m.block_index(0)];
  Workload w = long_sequences(8);
  w.flash_attention = true;
  w.sequence_parallel = true;
  const LayerWork work = layer_work(m, block, w);
  REQUIRE(work.forward.attentions.size() == 1);
  const FusedAttention& a = work.forward.attentions[0];
  CHECK((a.batch == 2 && a.seq == 4096 && a.keys == 4096 && a.heads == 8 && a.kv_heads == 1 && a.head_dim == 128));
  // kv heads 1 a rank: the table has 8 only, so the attention stays the model's; GEMMs and collectives are read.
  double gemm_flops = 0, gemm_table = 0, comm_model = 0, comm_table = 0;
  for (const GemmShape& g : work.forward.gemms) {
    gemm_flops += g.flops();
    gemm_table += kPowerLawC * g.m * g.n * g.k;
  }
  REQUIRE(work.forward.collectives.size() == 4);  // all-gather and reduce-scatter around attention and MLP
  for (const Collective& c : work.forward.collectives) {
    comm_model += analytic.collective_time(c.kind, c.bytes, 8, h200.intra_node);
    comm_table += kCollectiveC * c.bytes / 2;  // elements of 2 bytes
  }
  const double without = analytic.phase_time(block, work, Phase::Forward, h200.gpu, h200.intra_node, 8);
  const double with = tables.phase_time(block, work, Phase::Forward, h200.gpu, h200.intra_node, 8);
  const double gemms_model = gemm_flops / (h200.gpu.peak_flops * params.gemm_efficiency) +
                             static_cast<double>(work.forward.gemms.size()) * params.kernel_overhead_s;
  CHECK(with == Approx(without - gemms_model + gemm_table - 0.75 * comm_model + 0.75 * comm_table).epsilon(1e-9));
  TableCostModel::Share s = tables.share();
  CHECK(s.attentions.missing == 1);
  CHECK(s.collectives.measured + s.collectives.interpolated == 2);  // one all-gather and one reduce-scatter size
  CHECK(s.collective_s == Approx(0.75 * comm_table).epsilon(1e-9));
  REQUIRE(!s.missing.empty());
  CHECK(s.missing.front().rfind("attention forward batch 2, sequence 4096, heads 8, kv heads 1, head dim 128 in ", 0) ==
        0);

  // At tp 1 the 8 kv heads are the table's: the attention forward is read (t = c b s^2 heads), the backward not.
  const LayerWork whole = layer_work(m, block, [&] {
    Workload one = w;
    one.tp = 1;
    one.sequence_parallel = false;
    return one;
  }());
  const double attention_model = whole.forward.attentions[0].flops / (h200.gpu.peak_flops * params.attention_efficiency) +
                                 params.kernel_overhead_s;
  double gemms = 0, flops = 0;
  for (const GemmShape& g : whole.forward.gemms) {
    gemms += kPowerLawC * g.m * g.n * g.k;
    flops += g.flops();
  }
  const double model_gemms = flops / (h200.gpu.peak_flops * params.gemm_efficiency) +
                             static_cast<double>(whole.forward.gemms.size()) * params.kernel_overhead_s;
  CHECK(tables.phase_time(block, whole, Phase::Forward, h200.gpu, h200.intra_node, 1) ==
        Approx(analytic.phase_time(block, whole, Phase::Forward, h200.gpu, h200.intra_node, 1) - model_gemms + gemms -
               attention_model + kAttentionC * 2 * 4096.0 * 4096 * 64)
            .epsilon(1e-9));
  REQUIRE(whole.backward_input.attentions.size() == 1);
  CHECK(whole.backward_input.attentions[0].backward);
  s = tables.share();
  CHECK(s.attentions.measured == 1);
  CHECK(s.attention_s == Approx(kAttentionC * 2 * 4096.0 * 4096 * 64).epsilon(1e-9));

  // Across nodes the collectives are the model's.
  const LinkSpec across{h200.intra_node.bandwidth_bytes_per_s, h200.intra_node.latency_s, true};
  const double before = tables.share().collective_s;
  tables.phase_time(block, work, Phase::Forward, h200.gpu, across, 8);
  CHECK(tables.share().collective_s == before);
}

TEST_CASE("a serving step's dense GEMMs are the tables' at the step's tokens, the rest the model's", "[kernels]") {
  const AnalyticCostModel analytic;
  const TableCostModel tables(analytic, power_law_tables("table_cost_model_serving"));
  const Cluster h200 = cluster_preset("hgx-h200");
  const Model m = model_preset("llama3-8b");
  const Layer& block = m.layers[m.block_index(0)];
  const ServingBatch batch = sixteen_decodes();
  const ServingWork work = serving_layer_work(m, block, 1, batch);
  // The forward GEMMs of one token (QKV, output, gate and up, down) at m 16: their FLOPs and weights out of the
  // model's work, their table times in.
  Workload one;
  one.seq_len = 1;
  ServingWork rest = work;
  double table = 0;
  for (GemmShape g : layer_work(m, block, one).forward.gemms) {
    g.m = 16;
    table += kPowerLawC * g.m * g.n * g.k;
    rest.gemm_flops -= g.flops();
    rest.weight_bytes -= 2 * g.k * g.n;
    rest.kernels -= 1;  // its fixed time is in the table's
  }
  CHECK(rest.kernels == 11 - 4);
  CHECK(rest.gemm_flops >= 0);
  CHECK(rest.gemm_flops == 2 * 16 * 2.0 * m.transformer->hidden);  // the two norms' weights only
  CHECK(tables.serving_time(block, work, h200.gpu, h200.intra_node, 1) ==
        Approx(analytic.serving_time(block, rest, h200.gpu, h200.intra_node, 1) + table).epsilon(1e-12));
  // The head: its GEMM at the sampled tokens.
  const Layer& head = m.layers.back();
  const ServingWork logits = serving_layer_work(m, head, 1, batch);
  ServingWork head_rest = logits;
  const double h = m.transformer->hidden, v = m.transformer->vocab;
  head_rest.gemm_flops = 0;
  head_rest.weight_bytes -= 2 * h * v;
  head_rest.kernels -= 1;
  CHECK(tables.serving_time(head, logits, h200.gpu, h200.intra_node, 1) ==
        Approx(analytic.serving_time(head, head_rest, h200.gpu, h200.intra_node, 1) + kPowerLawC * 16 * h * v)
            .epsilon(1e-12));
  const TableCostModel::Share s = tables.share();
  CHECK(s.gemm_s == Approx(table + kPowerLawC * 16 * h * v).margin(2e-12));  // summed in whole picoseconds
  // No generation attention table: the decode attention is the model's, and the kind is named.
  CHECK(s.absent == std::vector<std::string>{"generation_attention_perf"});
  // fp8 weights ask fp8 GEMMs of the same shapes (cached in bf16), which these tables lack: the model's, whole.
  const ServingWork fp8 = serving_layer_work(m, block, 1, batch, KvCacheDtype::Bf16, ServingWeights::Fp8);
  CHECK(tables.serving_time(block, fp8, h200.gpu, h200.intra_node, 1) ==
        analytic.serving_time(block, fp8, h200.gpu, h200.intra_node, 1));
  CHECK(tables.share().missing.front().rfind("fp8 GEMM m 16, n ", 0) == 0);
}

namespace {

// `dir` made a folder of one table, `t`, measured on `system` under `software`.
std::shared_ptr<KernelTables> one_table_folder(const std::filesystem::path& dir, const char* system, const char* software,
                                               const nlohmann::json& t) {
  const std::string kind = t.at("kind");
  std::ofstream(dir / (kind + ".json")) << t.dump();
  std::ofstream(dir / "manifest.json") << nlohmann::json{
      {"format", "pipewright-kernel-table"}, {"format_version", 1}, {"system", system}, {"software", software},
      {"tables", {{{"kind", kind}, {"file", kind + ".json"}, {"rows", t.at("rows").size()}}}}}.dump();
  return KernelTables::open(dir.string());
}

// An h200_sxm folder of moe_perf alone: Qwen3-30B-A3B's routed experts (hidden 2048, expert inter 768, top 8 of
// 128) in bfloat16 at moe tp 1 ep 1 and moe tp 1 ep 4, balanced, num_tokens 1 to 4096, from two kernels: "a"
// takes 1 us a token + 5 us, "b" 2 us a token + 1 us (b is the faster below 4 tokens). And a row of skewed
// routing, which a balanced question never reads.
std::shared_ptr<KernelTables> moe_tables(const std::string& name) {
  const auto dir = fresh_folder(name);
  nlohmann::json rows = nlohmann::json::array();
  for (int ep : {1, 4})
    for (int e = 0; e <= 12; ++e) {
      const double tokens = 1 << e;
      rows.push_back({"bfloat16", "balanced", "a", 2048, 768, 8, 128, 1, ep, tokens, 1e-6 * tokens + 5e-6});
      rows.push_back({"bfloat16", "balanced", "b", 2048, 768, 8, 128, 1, ep, tokens, 2e-6 * tokens + 1e-6});
      rows.push_back({"bfloat16", "power_law_1.2", "a", 2048, 768, 8, 128, 1, ep, tokens, 1e-9});
    }
  const nlohmann::json t = table("moe_perf",
                                 {"moe_dtype", "distribution", "kernel_source", "hidden_size", "inter_size", "topk",
                                  "num_experts", "moe_tp_size", "moe_ep_size", "num_tokens"},
                                 rows);
  return one_table_folder(dir, "h200_sxm", "test", t);
}

}  // namespace

TEST_CASE("a serving step's routed experts are the moe table's at the tokens reaching them, the rest the model's",
          "[kernels]") {
  const AnalyticCostModel analytic;
  const TableCostModel tables(analytic, moe_tables("table_cost_model_moe"));
  const Cluster h200 = cluster_preset("hgx-h200");
  const Model m = model_preset("qwen3-30b-a3b");
  const Layer& block = m.layers[m.block_index(0)];
  const ServingBatch batch = sixteen_decodes();
  // tp 1: the 16 tokens reach the GPU's experts; kernel a's 21 us (b's 33 us) in place of the model's routed FLOPs
  // (2 x 3 x 2048 x 768 x 128 parameters x 16 tokens x 8 / 128) and of the weights 16 tokens touch. The table's
  // balanced routing puts 16 x 8 copies on all 128 experts; 16 tokens routed at random reach 1 - (15/16)^16 of
  // them: the time in that ratio.
  const auto touched = [](double tokens) { return (1 - std::pow(15.0 / 16, tokens)) / std::min(1.0, tokens / 16); };
  const ServingWork work = serving_layer_work(m, block, 1, batch);
  CHECK(work.routed_tokens == 16);
  CHECK(work.routed_flops == 2 * 3.0 * 2048 * 768 * 128 * 16 * 8 / 128);
  ServingWork rest = work;
  rest.gemm_flops -= work.routed_flops;
  rest.weight_bytes -= work.routed_weight_bytes;
  // The fused MoE call's kernels (alignment, two grouped GEMMs, activation, combine) are in the table's time; the
  // router's GEMM and top-k stay the model's.
  CHECK(work.kernels == 11 + 7);
  rest.kernels -= 5;
  CHECK(tables.serving_time(block, work, h200.gpu, h200.intra_node, 1) ==
        Approx(analytic.serving_time(block, rest, h200.gpu, h200.intra_node, 1) + 21e-6 * touched(16)).epsilon(1e-12));
  // Data-parallel attention engines with the experts over ep 4: every engine's 64 tokens reach them; at 2 tokens
  // kernel b is the faster (5 us against 7 us).
  for (const auto& [tokens, table_s] : {std::pair{64.0, 69e-6}, std::pair{2.0, 5e-6}}) {
    const ServingWork spread = serving_layer_work(m, block, 1, batch, KvCacheDtype::Bf16, ServingWeights::Bf16,
                                                  ServingExperts{4, tokens});
    CHECK(spread.ep == 4);
    ServingWork spread_rest = spread;
    spread_rest.gemm_flops -= spread.routed_flops;
    spread_rest.weight_bytes -= spread.routed_weight_bytes;
    spread_rest.kernels -= 5;
    CHECK(tables.serving_time(block, spread, h200.gpu, h200.intra_node, 1) ==
          Approx(analytic.serving_time(block, spread_rest, h200.gpu, h200.intra_node, 1) + table_s * touched(tokens))
              .epsilon(1e-12));
  }
  // tp 2 splits every expert (moe tp 2), which the table never measured: the model's, whole, and named.
  const ServingWork split = serving_layer_work(m, block, 2, batch);
  CHECK(tables.serving_time(block, split, h200.gpu, h200.intra_node, 2) ==
        analytic.serving_time(block, split, h200.gpu, h200.intra_node, 2));
  const TableCostModel::Share s = tables.share();
  CHECK(touched(2) == Approx(0.96875));  // 2 tokens: 16 copies on 16 experts balanced, 15.5 at random
  CHECK(s.gemm_s == Approx(21e-6 * touched(16) + 69e-6 * touched(64) + 5e-6 * touched(2)).margin(4e-12));
  CHECK(s.gemms.measured == 3);
  CHECK(s.gemms.missing == 1);
  REQUIRE(s.missing.size() == 1);
  CHECK(s.missing[0].rfind("MoE of 16 tokens, hidden 2048, expert inter 768, top 8 of 128 experts, moe tp 2, ep 1 in " +
                               block.name + ": ",
                           0) == 0);
  // No gemm_perf, nccl_perf (tp 2's all-reduces) or decode attention: the model's, and the kinds named.
  CHECK(s.absent == std::vector<std::string>{"gemm_perf", "nccl_perf", "generation_attention_perf"});
  // A dense block asks no MoE.
  const Model dense = model_preset("llama3-8b");
  const ServingWork dense_work = serving_layer_work(dense, dense.layers[dense.block_index(0)], 1, batch);
  CHECK(dense_work.routed_tokens == 0);
  CHECK(dense_work.routed_flops == 0);
}

namespace {

// An h100_sxm folder of wideep_deepep_normal_perf alone: DeepEP's normal kernels at hidden 7168, top 8 of 256
// experts, 20 SMs (and a 24-SM row a question never reads), over 2 nodes, 64 to 4096 tokens a rank: dispatch
// transmit 1 us a token, notify 10 us; combine transmit 2 us a token, notify 20 us.
std::shared_ptr<KernelTables> deepep_tables(const std::string& name) {
  const auto dir = fresh_folder(name);
  nlohmann::json rows = nlohmann::json::array();
  for (int e = 6; e <= 12; ++e) {
    const double tokens = 1 << e;
    for (int sms : {20, 24})
      rows.push_back({"normal", "deepep", 2, 7168, tokens, 8, 256, sms, sms, 1e-6 * tokens * (sms == 20 ? 1 : 9), 10e-6,
                      2e-6 * tokens, 20e-6});
  }
  nlohmann::json t = {{"format", "pipewright-kernel-table"},
                      {"format_version", 1},
                      {"kind", "wideep_deepep_normal_perf"},
                      {"keys", {"op_name", "kernel_source", "node_num", "hidden_size", "num_token", "num_topk",
                                "num_experts", "dispatch_sms", "combine_sms"}},
                      {"times", {"dispatch_transmit_s", "dispatch_notify_s", "combine_transmit_s", "combine_notify_s"}},
                      {"rows", rows}};
  return one_table_folder(dir, "h100_sxm", "sglang", t);
}

// An MoE layer's work with its dispatch and combine in F and their gradients in B, `tokens` a rank.
LayerWork routed_work(double tokens, bool flex) {
  LayerWork w;
  const RoutedDispatch d{256, 8, flex, 8, 4, tokens, 7168, flex ? DeepEpKernels::Normal : DeepEpKernels::None};
  for (PhaseWork* p : {&w.forward, &w.backward_input}) {
    p->all_to_alls = {2 * 8 * tokens * 7168, 2 * 8 * tokens * 7168};
    p->dispatch = d;
  }
  return w;
}

}  // namespace

TEST_CASE("the flex dispatcher's all-to-alls are DeepEP's measured kernels at the ep group's nodes, the rest the model's",
          "[kernels]") {
  const AnalyticCostModel analytic;
  const TableCostModel tables(analytic, deepep_tables("table_cost_model_deepep"));
  const Cluster h100 = cluster_preset("dgx-h100");
  // ep 16 over two 8-GPU nodes.
  ParallelConfig pc;
  pc.ep = 16;
  pc.dp = 16;
  AllToAllLinks links = all_to_all_links(h100, pc, 0);
  REQUIRE((links.ranks == 16 && links.in_node == 7 && links.across == 8));
  // 1024 tokens: a dispatch of 1024 + 10 us and a combine of 2048 + 20 us, in F and again in B; W has none.
  const LayerWork w = routed_work(1024, true);
  CHECK(tables.expert_comm_time(w, Phase::Forward, links) == Approx(1034e-6 + 2068e-6).epsilon(1e-12));
  CHECK(tables.expert_comm_time(w, Phase::BackwardInput, links) == Approx(1034e-6 + 2068e-6).epsilon(1e-12));
  CHECK(tables.expert_comm_time(w, Phase::BackwardWeight, links) == 0);
  // Between measured token counts: read as every table is (log-log between 1024 and 2048 tokens: linear here).
  CHECK(tables.expert_comm_time(routed_work(1500, true), Phase::Forward, links) ==
        Approx(1510e-6 + 3020e-6).epsilon(1e-9));
  // The alltoall dispatcher, another GPU, a node count the table lacks: the model's.
  const LayerWork plain = routed_work(1024, false);
  CHECK(tables.expert_comm_time(plain, Phase::Forward, links) == analytic.expert_comm_time(plain, Phase::Forward, links));
  AllToAllLinks elsewhere = links;
  elsewhere.gpu = cluster_preset("dgx-a100-80gb").gpu;
  CHECK(tables.expert_comm_time(w, Phase::Forward, elsewhere) == analytic.expert_comm_time(w, Phase::Forward, elsewhere));
  pc.ep = 32;
  pc.dp = 32;
  const AllToAllLinks four_nodes = all_to_all_links(h100, pc, 0);
  CHECK(tables.expert_comm_time(w, Phase::Forward, four_nodes) ==
        analytic.expert_comm_time(w, Phase::Forward, four_nodes));
  const TableCostModel::Share s = tables.share();
  CHECK(s.all_to_alls.measured == 2);      // 1024 tokens: dispatch and combine
  CHECK(s.all_to_alls.interpolated == 2);  // 1500
  CHECK(s.all_to_alls.missing == 2);       // over 4 nodes
  REQUIRE(!s.missing.empty());
  CHECK(s.missing.front() == "DeepEP dispatch of 1024 tokens a rank (hidden 7168, top 8 of 256 experts) over 4 nodes: "
                             "wideep_deepep_normal_perf (op_name=normal, node_num=4, hidden_size=7168, num_topk=8, "
                             "num_experts=256, dispatch_sms=20, combine_sms=20): no measured rows");
  // Priced from the tables: F and B at 1024 tokens, F at 1500.
  CHECK(s.all_to_all_s == Approx(2 * (1034e-6 + 2068e-6) + (1510e-6 + 3020e-6)).epsilon(1e-9));
}

namespace {

// An h200_sxm folder of wideep_deepep_ll_perf alone: DeepEP's low-latency kernels for Qwen3-30B-A3B's shape
// (hidden 2048, top 8 of 128 experts) over 2 nodes, 1 to 256 tokens a rank: dispatch 10 us + 1 us a token,
// combine 20 us + 2 us a token.
std::shared_ptr<KernelTables> deepep_low_latency_tables(const std::string& name) {
  nlohmann::json rows = nlohmann::json::array();
  for (int e = 0; e <= 8; ++e) {
    const double tokens = 1 << e;
    rows.push_back({"ll", "deepep", 2, 2048, tokens, 8, 128, 20e-6 + 2e-6 * tokens, 10e-6 + 1e-6 * tokens});
  }
  const nlohmann::json t = {{"format", "pipewright-kernel-table"},
                            {"format_version", 1},
                            {"kind", "wideep_deepep_ll_perf"},
                            {"keys", {"op_name", "kernel_source", "node_num", "hidden_size", "num_token", "num_topk",
                                      "num_experts"}},
                            {"times", {"combine_avg_t_s", "dispatch_avg_t_s"}},
                            {"rows", rows}};
  return one_table_folder(fresh_folder(name), "h200_sxm", "sglang", t);
}

}  // namespace

TEST_CASE("data-parallel attention's decode steps exchange tokens on DeepEP's low-latency kernels, from the tables",
          "[kernels]") {
  const AnalyticCostModel analytic;
  const TableCostModel tables(analytic, deepep_low_latency_tables("table_cost_model_deepep_ll"));
  const Cluster h200 = cluster_preset("hgx-h200");
  const Model m = model_preset("qwen3-30b-a3b");
  // 16 engines of one GPU over two nodes: ep 16. A decode step of 64 sequences on each: 64 tokens a rank.
  ServingConfig engine;
  engine.tp = 1;
  ServingBatch decodes;
  decodes.decode_tokens = 64;
  decodes.decode_context = 64 * 1000.0;
  decodes.sampled_tokens = 64;
  const std::vector<ServingBatch> step(16, decodes);
  const int moe_blocks = 48;
  // Each MoE block adds a dispatch of 74 us and a combine of 148 us in place of the model's exchange.
  ParallelConfig pc;
  pc.tp = 1;
  pc.dp = 16;
  pc.ep = 16;
  const AllToAllLinks links = all_to_all_links(h200, pc, 0);
  REQUIRE((links.ranks == 16 && links.in_node == 7));
  LayerWork exchange;
  exchange.forward.all_to_alls.assign(2, 2.0 * 64 * 8 * 2048);
  exchange.forward.dispatch = RoutedDispatch{128, 8, false};
  const double model_exchange = analytic.expert_comm_time(exchange, Phase::Forward, links);
  CHECK(dp_attention_step_time(m, h200, tables, engine, step) ==
        Approx(dp_attention_step_time(m, h200, analytic, engine, step) + moe_blocks * (74e-6 + 148e-6 - model_exchange))
            .epsilon(1e-9));
  CHECK(tables.share().all_to_alls.measured == 2);
  // A step with a prefill runs DeepEP's normal kernels, which this folder does not time: the model's, and said so.
  std::vector<ServingBatch> with_prefill = step;
  with_prefill[0].prefill_tokens = 100;
  with_prefill[0].prefill_sequences = 1;
  CHECK(dp_attention_step_time(m, h200, tables, engine, with_prefill) ==
        dp_attention_step_time(m, h200, analytic, engine, with_prefill));
  // (The folder's other absent kinds are the serving step's GEMMs, decode attention and experts.)
  CHECK(tables.share().absent == std::vector<std::string>{"gemm_perf", "generation_attention_perf", "moe_perf",
                                                          "wideep_deepep_normal_perf"});
}
