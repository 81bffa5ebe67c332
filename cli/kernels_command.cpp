// `pipewright kernels`: measured kernel tables (docs/kernel-tables.md).
//   kernels import aiconfigurator --system S --backend B [--version V] [--nccl-version N] [--data DIR] --out DIR
//   kernels show DIR                      what a folder holds: the source, versions, and each table's rows
//   kernels query DIR --gemm M N K        one shape's time from the tables, and how it was read (or --collective,
//                                         --attention, --deepep)
//   kernels compare A B                   B's times over A's on the shapes both measured, kind by kind
//   kernels coverage DIR --model M --cluster C [simulate's options]
//                                         what that run would ask of the tables that they do not have
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "cli/commands.hpp"
#include "cli/cost_model_chain.hpp"
#include "cli/python_module.hpp"
#include "cli/scenario_options.hpp"
#include "core/analytic_cost_model.hpp"
#include "core/cluster.hpp"
#include "core/error.hpp"
#include "core/units.hpp"
#include "core/work_estimate.hpp"
#include "core/workload.hpp"
#include "kernels/installed_tables.hpp"
#include "kernels/kernel_queries.hpp"
#include "kernels/table_compare.hpp"
#include "kernels/table_cost_model.hpp"
#include "sim/scenario.hpp"

namespace pw {
namespace {

struct ImportOptions {
  std::string system, backend, version, nccl_version, data, out, kinds;
  bool list = false;
  bool install = false;
};

struct QueryOptions {
  std::string folder, precision = "bf16", collective, cluster;
  std::vector<double> gemm;
  double bytes = 0;
  int gpus = 0;
  std::vector<int> attention;
  std::vector<double> deepep;  // tokens a rank, nodes, hidden, top k, experts
  bool low_latency = false;
};

TableCollective collective_from_string(const std::string& s) {
  if (s == "all-reduce") return TableCollective::AllReduce;
  if (s == "all-gather") return TableCollective::AllGather;
  if (s == "reduce-scatter") return TableCollective::ReduceScatter;
  if (s == "all-to-all") return TableCollective::AllToAll;
  throw_bad_input("--collective: '{}' is not one of all-reduce, all-gather, reduce-scatter, all-to-all", s);
}

std::string time_line(const TableTime& t) {
  if (!t.found()) return fmt::format("no time: {}", t.note);
  std::string line = fmt::format("{} ({})", format_seconds(t.seconds), to_string(t.how));
  if (!t.note.empty()) line += ": " + t.note;
  return line;
}

void show(const std::string& folder, std::ostream& out) {
  const auto tables = KernelTables::open(folder);
  out << fmt::format("{}: {} {}, from {}\n", tables->folder(), tables->system(), tables->software(),
                     tables->source().empty() ? "an unnamed source" : tables->source());
  std::string versions;
  for (const auto& [what, v] : tables->versions()) versions += fmt::format("{}{} {}", versions.empty() ? "" : ", ", what, v);
  if (!versions.empty()) out << "versions: " << versions << "\n";
  size_t width = 4;
  for (const KernelTableEntry& e : tables->entries()) width = std::max(width, e.kind.size());
  out << fmt::format("\n  {:<{}} {:>9}  {}\n", "kind", width, "rows", "from");
  long rows = 0;
  for (const KernelTableEntry& e : tables->entries()) {
    out << fmt::format("  {:<{}} {:>9}  {}\n", e.kind, width, e.rows, e.from);
    rows += e.rows;
  }
  out << fmt::format("  {:<{}} {:>9}\n", "all", width, rows);
}

void query(const QueryOptions& o, std::ostream& out) {
  KernelQueries q(KernelTables::open(o.folder));
  const Precision precision = precision_from_string(o.precision);
  const int asked = !o.gemm.empty() + !o.collective.empty() + !o.attention.empty() + !o.deepep.empty();
  if (asked != 1)
    throw_bad_input("kernels query: give one of --gemm M N K, --collective OP, --attention B S H KV D, --deepep T N H K E");
  if (!o.deepep.empty()) {
    const auto& d = o.deepep;
    if (!(d[0] >= 1 && d[0] <= 1e7)) throw_bad_input("--deepep: {:g} is not a count of tokens a rank from 1 to 1e7", d[0]);
    for (size_t i = 1; i < d.size(); ++i)
      if (!(d[i] >= 1 && d[i] <= 1 << 20 && d[i] == std::floor(d[i])))
        throw_bad_input("--deepep: {:g} is not a whole count from 1 to 2^20 (nodes, hidden size, top k, experts)", d[i]);
    const int nodes = static_cast<int>(d[1]), hidden = static_cast<int>(d[2]), topk = static_cast<int>(d[3]),
              experts = static_cast<int>(d[4]);
    const char* kernels = o.low_latency ? "low-latency" : "normal";
    for (bool dispatch : {true, false}) {
      const TableTime t = o.low_latency ? q.deepep_low_latency(dispatch, nodes, hidden, topk, experts, d[0])
                                        : q.deepep_normal(dispatch, nodes, hidden, topk, experts,
                                                          TableCostModel::kDeepEpSms, d[0]);
      out << fmt::format("DeepEP {} {} of {:g} tokens a rank over {} nodes (hidden {}, top {} of {} experts{}): {}\n",
                         kernels, dispatch ? "dispatch" : "combine", d[0], nodes, hidden, topk, experts,
                         o.low_latency ? "" : fmt::format(", {} SMs", TableCostModel::kDeepEpSms), time_line(t));
    }
    return;
  }
  if (!o.gemm.empty()) {
    for (double x : o.gemm)
      if (!(x >= 1 && x <= 1e9)) throw_bad_input("--gemm: {:g} is not a dimension from 1 to 1e9", x);
    const TableTime t = q.gemm(precision, o.gemm[0], o.gemm[1], o.gemm[2]);
    out << fmt::format("gemm m {:g}, n {:g}, k {:g} {}: {}\n", o.gemm[0], o.gemm[1], o.gemm[2], o.precision, time_line(t));
    if (t.found())
      out << fmt::format("  {} at that time\n",
                         format_flops(2 * o.gemm[0] * o.gemm[1] * o.gemm[2] / std::max(t.seconds, 1e-12)));
    if (!o.cluster.empty()) {
      // The analytic model's price for the same GEMM: a layer of that one GEMM, its forward phase.
      const Cluster c = load_for_option("--cluster", o.cluster, load_cluster);
      LayerWork work;
      (precision == Precision::Fp8 ? work.forward.fp8_gemm_flops : work.forward.gemm_flops) =
          2 * o.gemm[0] * o.gemm[1] * o.gemm[2];
      work.forward.kernels = 1;
      const double model = AnalyticCostModel().phase_time(Layer{}, work, Phase::Forward, c.gpu, c.intra_node, 1);
      out << fmt::format("  the analytic model on {}: {}{}\n", c.gpu.name, format_seconds(model),
                         t.found() ? fmt::format(" (tables / model = {:.2f})", t.seconds / model) : "");
    }
    return;
  }
  if (!o.collective.empty()) {
    const TableCollective op = collective_from_string(o.collective);
    if (!(o.bytes >= 1 && o.bytes <= 1e15)) throw_bad_input("--bytes: give the bytes a GPU sends, from 1 to 1e15");
    if (o.gpus < 2 || o.gpus > 1 << 20) throw_bad_input("--gpus: give the GPUs of the collective, 2 or more");
    const TableTime t = q.collective(op, precision, o.bytes, o.gpus);
    out << fmt::format("{} of {} over {} GPUs ({}): {}\n", o.collective, format_bytes(o.bytes), o.gpus, o.precision,
                       time_line(t));
    return;
  }
  for (int x : o.attention)
    if (x < 1 || x > 1 << 24) throw_bad_input("--attention: {} is not a size from 1 to 2^24", x);
  const auto& a = o.attention;
  const TableTime t = q.context_attention(precision, a[0], a[1], a[2], a[3], a[4]);
  out << fmt::format("prefill attention, batch {} x {} tokens, {} heads ({} kv) of {}: {}\n", a[0], a[1], a[2], a[3],
                     a[4], time_line(t));
}

void compare(const std::string& first, const std::string& second, std::ostream& out) {
  const auto a = KernelTables::open(first), b = KernelTables::open(second);
  const auto named = [](const KernelTables& t) {
    return fmt::format("{} ({} {}, {})", t.folder(), t.system(), t.software(),
                       t.source().empty() ? "an unnamed source" : t.source());
  };
  out << "A: " << named(*a) << "\nB: " << named(*b) << "\n";
  const std::vector<KindComparison> rows = compare_tables(a, b);
  if (rows.empty()) {
    out << "no kind of table is in both folders\n";
    return;
  }
  size_t kind = 4, group = 5;
  for (const KindComparison& c : rows) {
    kind = std::max(kind, c.kind.size());
    group = std::max(group, c.group.size());
  }
  out << fmt::format("\n  {:<{}}  {:<{}}  {:>9}  {:>12}  {:>8}  {:>8}\n", "kind", kind, "group", group, "shapes",
                     "B / A median", "10%", "90%");
  for (const KindComparison& c : rows) {
    if (c.shapes == 0) {
      out << fmt::format("  {:<{}}  {:<{}}  {:>9}  no shape measured by both\n", c.kind, kind, "-", group, 0);
      continue;
    }
    out << fmt::format("  {:<{}}  {:<{}}  {:>9}  {:>12.3f}  {:>8.3f}  {:>8.3f}\n", c.kind, kind,
                       c.group.empty() ? "-" : c.group, group, with_commas(c.shapes), c.median, c.p10, c.p90);
  }
}

// One step of the scenario priced with the tables over the analytic model, and every shape it asked that the
// tables lacked.
void coverage(const std::string& folder, ScenarioOptions o, std::ostream& out) {
  o.kernels = folder;
  const Scenario scenario = o.scenario_of(std::nullopt);
  const CostModelChain chain = o.cost_models(scenario.model);
  const Evaluation ev = evaluate(scenario, chain.model());
  const TableCostModel::Share s = chain.tables()->share();
  const ParallelConfig& p = ev.scenario.parallel;
  out << fmt::format("{} on {} x {}, tp {} pp {} dp {}{}{}, micro-batch {} x {} tokens, with {} ({} {})\n",
                     ev.scenario.model.name, p.tp * p.pp * p.dp * p.cp, ev.scenario.cluster.gpu.name, p.tp, p.pp, p.dp,
                     p.cp > 1 ? fmt::format(" cp {}", p.cp) : "", p.ep > 1 ? fmt::format(" ep {}", p.ep) : "",
                     ev.scenario.workload.micro_batch_size, resolved_seq(ev.scenario.model, ev.scenario.workload),
                     folder, chain.tables()->tables().system(), chain.tables()->tables().software());
  for (const std::string& line : chain.table_lines())
    if (line.rfind("the first shape not in the tables", 0) != 0) out << "  " << line << "\n";
  if (s.missing.empty()) {
    out << "  every shape asked is in the tables\n";
  } else {
    out << fmt::format("  not in the tables ({}{}), each priced by the model below:\n", s.missing.size(),
                       s.missing.size() == TableCostModel::kMaxMissing ? ", the first" : "");
    for (const std::string& m : s.missing) out << "    " << m << "\n";
  }
  out << "  never asked of the tables: memory-bound work, the attention backward, MLA's, a sliding window's and "
         "context parallelism's attention, collectives across nodes, expert all-to-alls and the routed experts' "
         "grouped GEMMs\n";
}

}  // namespace

CommandRunner add_kernels_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("kernels", "Measured kernel tables: import published ones, show and query them");
  cmd->require_subcommand(1);

  auto* import = cmd->add_subcommand("import", "Convert published kernel tables into pipewright's format");
  import->require_subcommand(1);
  auto* aic = import->add_subcommand("aiconfigurator",
                                     "NVIDIA AIConfigurator's measured tables (the aiconfigurator-core package, or "
                                     "--data)");
  auto io = std::make_shared<ImportOptions>();
  aic->add_option("--system", io->system, "GPU system: h100_sxm, h200_sxm, b200_sxm, gb200, a100_sxm, ...");
  aic->add_option("--backend", io->backend, "Framework whose tables to read: vllm, sglang, trtllm");
  aic->add_option("--version", io->version, "Framework version (default: the newest of each op family)");
  aic->add_option("--nccl-version", io->nccl_version, "NCCL version of the collective tables (default: the newest)");
  aic->add_option("--data", io->data, "AIConfigurator's systems/data folder (default: the installed package's)");
  aic->add_option("--out", io->out, "A new folder for the tables");
  aic->add_option("--kinds", io->kinds, "Only these kinds, comma-separated: gemm_perf,nccl_perf,... (default: all)");
  aic->add_flag("--list", io->list, "List the systems, frameworks and versions there");
  aic->add_flag("--install", io->install,
                "Write them into the installed tables (" + kernel_tables_home() +
                    "/SYSTEM-BACKEND) for --kernels installed and `pipewright clusters`");

  auto* show_cmd = cmd->add_subcommand("show", "What a folder of kernel tables holds");
  auto folder = std::make_shared<std::string>();
  show_cmd->add_option("folder", *folder, "A folder of kernel tables")->required();

  auto* query_cmd = cmd->add_subcommand("query", "One shape's time from a folder of kernel tables");
  auto qo = std::make_shared<QueryOptions>();
  query_cmd->add_option("folder", qo->folder, "A folder of kernel tables")->required();
  query_cmd->add_option("--gemm", qo->gemm, "A GEMM's M N K (an M x K matrix times a K x N one)")->expected(3);
  query_cmd->add_option("--collective", qo->collective, "all-reduce, all-gather, reduce-scatter or all-to-all");
  query_cmd->add_option("--bytes", qo->bytes, "The collective's bytes a GPU");
  query_cmd->add_option("--gpus", qo->gpus, "The collective's GPUs");
  query_cmd->add_option("--attention", qo->attention, "Prefill attention: batch, tokens, heads, kv heads, head dim")
      ->expected(5);
  query_cmd->add_option("--deepep", qo->deepep,
                        "DeepEP's dispatch and combine: tokens a rank, nodes of 8 GPUs, hidden size, top k, experts")
      ->expected(5);
  query_cmd->add_flag("--low-latency", qo->low_latency, "With --deepep: the low-latency kernels (a decode step's)");
  query_cmd->add_option("--precision", qo->precision, "bf16 or fp8 (default bf16)");
  query_cmd->add_option("--cluster", qo->cluster, "With --gemm: the analytic model's time on this cluster's GPU beside");

  auto* compare_cmd = cmd->add_subcommand("compare", "Two folders of kernel tables on the shapes both measured");
  auto compared = std::make_shared<std::pair<std::string, std::string>>();
  compare_cmd->add_option("first", compared->first, "A folder of kernel tables (A)")->required();
  compare_cmd->add_option("second", compared->second, "Another (B), its times over A's")->required();

  auto* coverage_cmd = cmd->add_subcommand(
      "coverage", "What a run (simulate's options) would ask of a folder of kernel tables that it does not have");
  auto coverage_folder = std::make_shared<std::string>();
  auto scenario = std::make_shared<ScenarioOptions>();
  coverage_cmd->add_option("folder", *coverage_folder, "A folder of kernel tables")->required();
  scenario->add_to(*coverage_cmd);

  return [=](std::ostream& out) {
    if (compare_cmd->parsed()) {
      compare(compared->first, compared->second, out);
    } else if (coverage_cmd->parsed()) {
      coverage(*coverage_folder, *scenario, out);
    } else if (aic->parsed()) {
      std::string out_folder = io->out;
      if (io->install) {
        if (!io->out.empty()) throw_bad_input("--install: the folder is the installed one; leave out --out");
        if (io->system.empty() || io->backend.empty())
          throw_bad_input("--install: give --system and --backend (--list shows them)");
        out_folder = kernel_tables_home() + "/" + io->system + "-" + io->backend;
        std::error_code ec;
        std::filesystem::create_directories(kernel_tables_home(), ec);
        if (ec) throw_runtime("--install: cannot make '{}': {}", kernel_tables_home(), ec.message());
      }
      std::vector<std::string> args;
      const auto pass = [&](const char* flag, const std::string& v) {
        if (!v.empty()) args.insert(args.end(), {flag, v});
      };
      pass("--system", io->system);
      pass("--backend", io->backend);
      pass("--version", io->version);
      pass("--nccl-version", io->nccl_version);
      pass("--data", io->data);
      pass("--out", out_folder);
      pass("--kinds", io->kinds);
      if (io->list) args.push_back("--list");
      run_python_module("pipewright.kernels.aiconfigurator", args, out);
    } else if (show_cmd->parsed()) {
      show(*folder, out);
    } else if (query_cmd->parsed()) {
      query(*qo, out);
    }
  };
}

}  // namespace pw
