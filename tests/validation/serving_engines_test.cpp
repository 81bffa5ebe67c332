// Published serving benchmarks of three engines (tests/validation/serving_published_engines.json: vLLM, SGLang
// and TensorRT-LLM, each row with its source, commit and every setting it states) predicted with each engine's
// defaults for its version (serving/engine_profile.hpp), the analytic cost model's defaults and no per-row
// factor. Prints the table docs/validation.md shows ("Serving: three engines") and draws
// docs/figures/serving-validation.svg (predicted against measured), failing when the figure is out of date
// (PIPEWRIGHT_UPDATE_GOLDEN=1 redraws it). The errors are held at today's values; the targets (median
// within 10%, the worst within 25%) are not met yet, and docs/validation.md says why.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/model.hpp"
#include "error_figure.hpp"
#include "kernels/kernel_table.hpp"
#include "kernels/table_cost_model.hpp"
#include "serving/dp_attention_serving.hpp"
#include "serving/engine_profile.hpp"
#include "serving/serving_metrics.hpp"
#include "serving/serving_sim.hpp"
#include "serving/serving_workload.hpp"

using namespace pw;

namespace {

std::string repo_path(const std::string& relative) { return std::string(PIPEWRIGHT_SOURCE_DIR) + "/" + relative; }

// A preset name, or a file under the repository.
std::string input(const std::string& name) { return name.find('/') == std::string::npos ? name : repo_path(name); }

struct Figure {
  std::string row, engine, metric;
  double measured = 0, predicted = 0;
  double error() const { return predicted / measured - 1; }
};

// The metric a row reports, as the simulation of its requests gives it.
double predicted(const ServingMetrics& m, const std::string& key, const std::vector<ServingRequest>& requests) {
  if (key == "output_tokens_per_s") return m.output_tokens_per_s;
  if (key == "generated_tokens_per_s") {
    // A decode pool's own tokens: each request's first arrived with it.
    double all = 0, generated = 0;
    for (const ServingRequest& q : requests) {
      all += static_cast<double>(q.output_tokens);
      generated += static_cast<double>(q.output_tokens - (q.prefilled ? 1 : 0));
    }
    return m.output_tokens_per_s * generated / all;
  }
  if (key == "input_tokens_per_s") return m.input_tokens_per_s;
  if (key == "tpot_p50_s") return m.tpot_p50_s;
  if (key == "ttft_p50_s") return m.ttft_p50_s;
  if (key == "itl_p50_s") return m.itl.at_s.at(0);
  if (key == "e2el_p50_s") return m.e2el.at_s.at(0);
  FAIL("unknown measured key " << key);
  return 0;
}

// Throughput, the time between tokens (TPOT, or ITL where only that is given) and the first token.
std::string metric_class(const std::string& key) {
  if (key == "output_tokens_per_s" || key == "input_tokens_per_s" || key == "generated_tokens_per_s") return "throughput";
  if (key == "tpot_p50_s" || key == "itl_p50_s") return "TPOT";
  if (key == "ttft_p50_s") return "TTFT";
  return "end to end";
}

// A row as it states itself and its engine's defaults for its version fill the rest.
struct ServingRow {
  std::string engine;
  Model model;
  Cluster cluster;
  ServingConfig config;
  int dp_attention = 1;  // data-parallel attention engines of tp GPUs each (serving/dp_attention_serving.hpp)
  std::vector<ServingRequest> requests;
};

ServingRow serving_row(const nlohmann::json& row) {
  ServingRow r;
  r.model = load_model(input(row.at("model")));
  r.cluster = load_cluster(input(row.at("cluster")));
  r.engine = row.at("engine");
  const std::string version = row.at("engine_version").is_null() ? std::string() : row.at("engine_version").get<std::string>();
  ServingConfig& c = r.config;
  c.tp = row.at("tp");
  c.apply(engine_profile(r.engine, version, r.model, r.cluster.gpu_at(0), c.tp, 1));
  c.weights = row.at("quantization") == "fp8" ? ServingWeights::Fp8 : ServingWeights::Bf16;
  c.kv_dtype = row.value("kv_cache_dtype", "auto") == "fp8" ? KvCacheDtype::Fp8 : KvCacheDtype::Bf16;
  c.concurrency = row.value("concurrency", 0);
  if (row.contains("max_num_seqs")) c.max_num_seqs = row.at("max_num_seqs");
  if (row.contains("max_num_batched_tokens")) c.max_num_batched_tokens = row.at("max_num_batched_tokens");
  r.dp_attention = row.value("dp_attention", 1);
  c.two_batch_overlap = row.value("two_batch_overlap", false);
  c.redundant_experts = row.value("redundant_experts", 0);
  WorkloadSpec w;
  // The lengths and arrivals the row's benchmark client drew, with its default seed (1 for both clients here).
  w.client = parse_bench_client(row.value("bench_client", "pipewright"), "bench_client");
  w.prompt = parse_length(row.at("prompt_tokens"), "prompt_tokens");
  w.output = parse_length(row.at("output_tokens"), "output_tokens", output_min(w.client));
  w.requests = row.at("requests");
  w.rate_per_s = row.value("rate", 0.0);
  r.requests = make_requests(w);
  // A decode pool measured alone: every prompt's cache and first token arrive with the request, as the pool's
  // prefill side, unlimited, delivers them.
  if (row.value("arrive_prefilled", false))
    for (ServingRequest& q : r.requests) q.prefilled = true;
  return r;
}

ServingResult simulate_row(const ServingRow& r, const CostModel& cost) {
  return r.dp_attention > 1 ? simulate_dp_attention(r.model, r.cluster, cost, r.config, r.dp_attention, r.requests)
                            : simulate_serving(r.model, r.cluster, cost, r.config, r.requests);
}

const char* engine_colour(const std::string& engine) {
  return engine == "vllm" ? "#1f77b4" : engine == "sglang" ? "#d62728" : "#2ca02c";
}

// Predicted against measured, each metric class its own panel on log axes; the diagonal and its +-25% band.
std::string serving_figure_svg(const std::vector<Figure>& figures) {
  const std::vector<std::string> panels{"throughput", "TPOT", "TTFT", "end to end"};
  const double w = 300, h = 300, pad = 45;
  std::string svg = fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
                                "font-family=\"sans-serif\" font-size=\"11\">\n",
                                panels.size() * (w + pad) + pad, h + 2 * pad + 20);
  for (size_t p = 0; p < panels.size(); ++p) {
    double lo = 1e300, hi = 0;
    for (const Figure& f : figures)
      if (metric_class(f.metric) == panels[p]) lo = std::min({lo, f.measured, f.predicted}), hi = std::max({hi, f.measured, f.predicted});
    const double x0 = pad + static_cast<double>(p) * (w + pad), y0 = pad;
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"none\" stroke=\"#888\"/>\n", x0, y0, w, h);
    const std::string unit = panels[p] == "throughput" ? "tokens/s" : "seconds";
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{} (measured across, predicted up; {}, log)</text>\n", x0, y0 - 8, panels[p], unit);
    if (hi <= 0) continue;
    const double a = std::log10(lo) - 0.1, b = std::log10(hi) + 0.1;
    const auto X = [&](double v) { return x0 + (std::log10(v) - a) / (b - a) * w; };
    const auto Y = [&](double v) { return y0 + h - (std::log10(v) - a) / (b - a) * h; };
    const double l = std::pow(10, a), u = std::pow(10, b);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#444\"/>\n", X(l), Y(l), X(u), Y(u));
    // predicted = k x measured, a parallel of the diagonal on log axes, clipped to the panel.
    for (double k : {1.25, 0.75}) {
      const double from = k > 1 ? l : l / k, to = k > 1 ? u / k : u;
      svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#bbb\" stroke-dasharray=\"4 3\"/>\n",
                         X(from), Y(from * k), X(to), Y(to * k));
    }
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{:.3g}</text><text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3g}</text>\n",
                       x0, y0 + h + 14, l, x0 + w, y0 + h + 14, u);
    for (const Figure& f : figures)
      if (metric_class(f.metric) == panels[p])
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\" fill-opacity=\"0.7\"/>\n", X(f.measured),
                           Y(f.predicted), engine_colour(f.engine));
  }
  double lx = pad;
  for (const char* e : {"vllm", "sglang", "trtllm"}) {
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"/><text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", lx,
                       h + 2 * pad + 5, engine_colour(e), lx + 8, h + 2 * pad + 9, e);
    lx += 90;
  }
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">diagonal: predicted = measured; dashed: 25% either side</text>\n", lx,
                     h + 2 * pad + 9);
  return svg + "</svg>\n";
}

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("published serving benchmarks of vLLM, SGLang and TensorRT-LLM, predicted with each engine's defaults") {
  const nlohmann::json rows = nlohmann::json::parse(read_file_text(repo_path("tests/validation/serving_published_engines.json")));
  const AnalyticCostModel cost;
  std::vector<Figure> figures;
  std::map<std::string, int> engines;
  std::string table = "| run | engine | figure | measured | predicted | error % |\n|---|---|---|---|---|---|\n";
  for (const nlohmann::json& row : rows) {
    const std::string name = row.at("name");
    INFO(name);
    const ServingRow r = serving_row(row);
    const std::string& engine = r.engine;
    ++engines[engine];
    const ServingMetrics m = serving_metrics(simulate_row(r, cost));
    for (const auto& [key, value] : row.at("measured").items()) {
      const Figure f{name, engine, key, value.get<double>(), predicted(m, key, r.requests)};
      figures.push_back(f);
      table += fmt::format("| {} | {} | {} | {:.4g} | {:.4g} | {:+.1f} |\n", name, engine, key, f.measured, f.predicted,
                           f.error() * 100);
    }
  }
  // At least 40 measurements from three engines, every one expressed.
  CHECK(engines.size() == 3);
  CHECK(rows.size() >= 40);
  // |error| by metric, over all engines ("all") and each.
  std::map<std::pair<std::string, std::string>, std::vector<double>> errors;
  for (const Figure& f : figures) {
    errors[{metric_class(f.metric), "all"}].push_back(std::abs(f.error()));
    errors[{metric_class(f.metric), f.engine}].push_back(std::abs(f.error()));
  }
  std::string summary;
  for (const auto& [key, e] : errors)
    summary += fmt::format("{} ({}): {} figures, median |error| {:.1f}%, max {:.1f}%\n", key.first, key.second, e.size(),
                           median(e) * 100, *std::max_element(e.begin(), e.end()) * 100);
  // Held at today's medians (docs/validation.md): a change that moves them is seen.
  CHECK(median(errors[{"throughput", "all"}]) <= 0.147);
  CHECK(median(errors[{"TPOT", "all"}]) <= 0.148);
  CHECK(median(errors[{"TTFT", "all"}]) <= 0.293);
  CHECK(median(errors[{"throughput", "trtllm"}]) <= 0.110);
  WARN(summary);
  // The whole table beside the build's other test output, for docs/validation.md.
  std::ofstream(std::string(PIPEWRIGHT_TEST_TMP) + "/serving-validation-table.md") << table << "\n" << summary;

  const std::string path = repo_path("docs/figures/serving-validation.svg");
  const std::string svg = serving_figure_svg(figures);
  if (std::getenv("PIPEWRIGHT_UPDATE_GOLDEN")) std::ofstream(path, std::ios::binary) << svg;
  INFO(path << " is out of date: run the validation test with PIPEWRIGHT_UPDATE_GOLDEN=1");
  CHECK(read_file_text(path) == svg);
}

// The client's draws are the benchmark's requests: the rows that publish their totals get them back exactly (a
// drawn output of 0, served as the prefill's one token, adds one: two 500-request rows hold one).
TEST_CASE("published serving benchmarks: sglang.bench_serving's draws reproduce the totals each run printed") {
  const nlohmann::json rows = nlohmann::json::parse(read_file_text(repo_path("tests/validation/serving_published_engines.json")));
  int checked = 0, exact = 0;
  for (const nlohmann::json& row : rows) {
    if (!row.contains("published_totals")) continue;
    INFO(row.at("name"));
    const ServingRow r = serving_row(row);
    long prompt = 0, output = 0;
    for (const ServingRequest& q : r.requests) prompt += q.prompt_tokens, output += q.output_tokens;
    CHECK(prompt == row.at("published_totals").at("prompt_tokens").get<long>());
    const long extra = output - row.at("published_totals").at("output_tokens").get<long>();
    CHECK((extra == 0 || extra == 1));
    ++checked;
    exact += extra == 0;
  }
  CHECK(checked == 24);
  CHECK(exact == 22);
}

namespace {

// The folders ctest imported (tests/CMakeLists.txt, PIPEWRIGHT_SERVING_TABLES: ':' between them).
std::vector<std::shared_ptr<KernelTables>> serving_tables() {
  const char* list = std::getenv("PIPEWRIGHT_SERVING_TABLES");
  INFO("PIPEWRIGHT_SERVING_TABLES names the folders of kernel tables; ctest's validation.kernel_tables sets it");
  REQUIRE(list);
  std::vector<std::shared_ptr<KernelTables>> out;
  std::stringstream folders(list);
  for (std::string dir; std::getline(folders, dir, ':');)
    if (!dir.empty()) out.push_back(KernelTables::open(dir));
  return out;
}

}  // namespace

// Hidden from the plain run: ctest runs it after importing AIConfigurator's tables (validation.kernel_tables).
TEST_CASE("published serving benchmarks predicted with their engine's kernel tables beside the analytic model",
          "[.tables]") {
  const nlohmann::json rows = nlohmann::json::parse(read_file_text(repo_path("tests/validation/serving_published_engines.json")));
  const std::vector<std::shared_ptr<KernelTables>> folders = serving_tables();
  const AnalyticCostModel analytic;
  std::string table =
      "| run | engine | tables | figure | measured | analytic | error % | with tables | error % | from tables |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n";
  // |error| by metric, over all engines ("all") and each.
  std::map<std::pair<std::string, std::string>, std::vector<double>> analytic_errors, table_errors;
  int priced = 0;
  for (const nlohmann::json& row : rows) {
    const std::string name = row.at("name");
    INFO(name);
    const ServingRow r = serving_row(row);
    // The engine's own tables measured on the row's GPU: rows without any keep to the analytic table above.
    std::shared_ptr<KernelTables> tables;
    for (const auto& f : folders)
      if (f->software() == r.engine && measured_on(r.cluster.gpu_at(0), *f)) tables = f;
    if (!tables) continue;
    ++priced;
    const TableCostModel with(analytic, tables);
    const ServingMetrics a = serving_metrics(simulate_row(r, analytic));
    const ServingMetrics t = serving_metrics(simulate_row(r, with));
    const TableCostModel::Share share = with.share();
    for (const auto& [key, value] : row.at("measured").items()) {
      const double measured = value.get<double>();
      const double pa = predicted(a, key, r.requests), pt = predicted(t, key, r.requests);
      for (const std::string& group : {std::string("all"), r.engine}) {
        analytic_errors[{metric_class(key), group}].push_back(std::abs(pa / measured - 1));
        table_errors[{metric_class(key), group}].push_back(std::abs(pt / measured - 1));
      }
      table += fmt::format("| {} | {} | {} {} | {} | {:.4g} | {:.4g} | {:+.1f} | {:.4g} | {:+.1f} | {:.0f}% |\n", name,
                           r.engine, tables->system(), tables->software(), key, measured, pa, (pa / measured - 1) * 100,
                           pt, (pt / measured - 1) * 100, 100 * share.table_s() / share.phase_s);
    }
  }
  std::string summary = "| figure | engine | count | median analytic | median with tables | max analytic | max with tables |\n"
                        "|---|---|---|---|---|---|---|\n";
  for (const auto& [key, e] : table_errors) {
    const std::vector<double>& a = analytic_errors[key];
    summary += fmt::format("| {} | {} | {} | {:.1f}% | {:.1f}% | {:.1f}% | {:.1f}% |\n", key.first, key.second, e.size(),
                           median(a) * 100, median(e) * 100, *std::max_element(a.begin(), a.end()) * 100,
                           *std::max_element(e.begin(), e.end()) * 100);
  }
  WARN(summary);
  std::ofstream(std::string(PIPEWRIGHT_TEST_TMP) + "/serving-validation-tables.md") << table << "\n" << summary;
  // Every row on a GPU whose engine's tables AIConfigurator publishes (all but the A100 40 GB and RTX 4090 rows).
  CHECK(priced >= 40);
  // Measured kernels lower every median: a small decode's GEMMs, attention and all-reduces take longer than their
  // rooflines (docs/kernel-tables.md). Held at today's figures, so a change in either model shows here.
  for (const char* metric : {"throughput", "TPOT", "TTFT", "end to end"}) {
    INFO(metric);
    CHECK(median(table_errors[{metric, "all"}]) < median(analytic_errors[{metric, "all"}]));
  }
  CHECK(median(table_errors[{"throughput", "all"}]) <= 0.09);
  CHECK(median(table_errors[{"TPOT", "all"}]) <= 0.055);
  CHECK(median(table_errors[{"TTFT", "all"}]) <= 0.193);
  CHECK(median(table_errors[{"end to end", "all"}]) <= 0.063);
}
