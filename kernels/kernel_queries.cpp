#include "kernels/kernel_queries.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace pw {

const char* gemm_dtype(Precision p) { return p == Precision::Fp8 ? "fp8" : "bfloat16"; }
const char* nccl_dtype(Precision p) { return p == Precision::Fp8 ? "int8" : "half"; }

const char* to_string(TableCollective op) {
  switch (op) {
    case TableCollective::AllReduce: return "all_reduce";
    case TableCollective::AllGather: return "all_gather";
    case TableCollective::ReduceScatter: return "reduce_scatter";
    case TableCollective::AllToAll: return "alltoall";
  }
  return "?";
}

namespace {

TableTime missing(std::string note) {
  TableTime t;
  t.note = std::move(note);
  return t;
}

// A GEMM with a dimension past twice the largest measured (a head's vocabulary of 150,000 to 200,000 against
// tables measured to 65,536) as c equal slices along it, c the fewest that bring each within the measured
// range, each read from the table: the tiles a kernel runs anyway, once the GEMM fills the GPU. Split over k
// it leaves out the c partial outputs' sum (m n c elements against m n k / c multiply-adds a slice).
TableTime sliced(const TableGrid& g, std::vector<double> at) {
  double slices = 1;
  std::string note;
  for (size_t a = 0; a < at.size(); ++a) {
    const double largest = g.largest(a);
    if (!(largest > 0) || at[a] <= largest * kExtrapolationFactor) continue;
    const double c = std::ceil(at[a] / largest);
    note += fmt::format("{}{} {:g} read as {:g} slices of {:g}", note.empty() ? "" : "; ", g.axes()[a], at[a], c, at[a] / c);
    at[a] /= c;
    slices *= c;
  }
  TableTime t = g.at(at);
  if (slices == 1 || !t.found()) return t;
  t.seconds *= slices;
  t.how = TableHow::Extrapolated;
  t.note = t.note.empty() ? note : note + "; " + t.note;
  return t;
}

}  // namespace

const TableGrid* KernelQueries::grid(const std::string& kind, const TableGrid::Select& select,
                                     const std::vector<std::string>& axes, const std::string& time) {
  std::string id = kind + ":" + time;
  for (const auto& [k, v] : select.text) id += fmt::format("|{}={}", k, v);
  for (const auto& [k, v] : select.number) id += fmt::format("|{}={:g}", k, v);
  for (const auto& [k, v] : select.number_if_present) id += fmt::format("|{}?={:g}", k, v);
  for (const auto& r : select.ratio) id += fmt::format("|{}/{}={:g}", r.numerator, r.denominator, r.value);
  if (auto it = grids_.find(id); it != grids_.end()) return it->second.get();
  const KernelTable* table = tables_->table(kind);
  if (!table) return nullptr;
  return grids_.emplace(id, std::make_unique<TableGrid>(*table, select, axes, time)).first->second.get();
}

TableTime KernelQueries::fastest_kernel(const KernelTable& table, const std::string& kind, TableGrid::Select select,
                                        const std::vector<std::string>& axes, const std::vector<double>& at, bool slice,
                                        const std::vector<std::string>& only) {
  const int source = table.key_index("kernel_source");
  // One grid a kernel: each has its own measured shapes, and the framework runs the fastest that has one.
  std::vector<std::string> sources{""};
  if (source >= 0 && table.key_is_text(source)) sources = table.text_values(source);
  // "gemm_perf: no fp8 rows": the first text key names what was asked (every caller selects a dtype first).
  TableTime best = only.empty()
                       ? missing(fmt::format("{}: no {} rows", kind, select.text.empty() ? "such" : select.text.front().second))
                       : missing(fmt::format("{}: no rows of {}", kind, fmt::join(only, " or ")));
  for (const std::string& s : sources) {
    if (!only.empty() && std::find(only.begin(), only.end(), s) == only.end()) continue;
    TableGrid::Select one = select;
    if (!s.empty()) one.text.emplace_back("kernel_source", s);
    const TableGrid* g = grid(kind, one, axes);
    if (!g || g->points() == 0) continue;
    const TableTime t = slice ? sliced(*g, at) : g->at(at);
    if (t.found() && (!best.found() || t.seconds < best.seconds)) best = t;
    if (!t.found() && !best.found()) best = t;
  }
  return best;
}

TableTime KernelQueries::gemm(Precision precision, double m, double n, double k) {
  const KernelTable* table = tables_->table("gemm_perf");
  if (!table) return missing("no gemm_perf table");
  TableGrid::Select select;
  select.text.emplace_back("gemm_dtype", gemm_dtype(precision));
  return fastest_kernel(*table, "gemm_perf", select, {"m", "n", "k"}, {m, n, k}, true);
}

TableTime KernelQueries::moe(bool fp8, double tokens, int hidden, int inter, int topk, int experts, int moe_tp,
                             int moe_ep) {
  const KernelTable* table = tables_->table("moe_perf");
  if (!table) return missing("no moe_perf table");
  TableGrid::Select select;
  select.text = {{"moe_dtype", fp8 ? "fp8" : "bfloat16"}, {"distribution", "balanced"}};
  select.number = {{"hidden_size", hidden}, {"inter_size", inter},      {"topk", topk},
                   {"num_experts", experts}, {"moe_tp_size", moe_tp}, {"moe_ep_size", moe_ep}};
  return fastest_kernel(*table, "moe_perf", select, {"num_tokens"}, {tokens}, false);
}

TableTime KernelQueries::deepep_normal(bool dispatch, int nodes, int hidden, int topk, int experts, int sms,
                                       double tokens) {
  if (!tables_->has("wideep_deepep_normal_perf")) return missing("no wideep_deepep_normal_perf table");
  TableGrid::Select select;
  select.text.emplace_back("op_name", "normal");
  select.number = {{"node_num", nodes},  {"hidden_size", hidden}, {"num_topk", topk},
                   {"num_experts", experts}, {"dispatch_sms", sms}, {"combine_sms", sms}};
  const std::string phase = dispatch ? "dispatch" : "combine";
  TableTime sum;
  for (const char* part : {"_transmit_s", "_notify_s"}) {
    const TableTime t = grid("wideep_deepep_normal_perf", select, {"num_token"}, phase + part)->at({tokens});
    if (!t.found()) return t;
    sum.seconds += t.seconds;
    // The less exact of the two readings stands for the sum.
    if (static_cast<int>(t.how) > static_cast<int>(sum.how) || sum.how == TableHow::Missing) sum.how = t.how, sum.note = t.note;
  }
  return sum;
}

TableTime KernelQueries::deepep_low_latency(bool dispatch, int nodes, int hidden, int topk, int experts, double tokens) {
  if (!tables_->has("wideep_deepep_ll_perf")) return missing("no wideep_deepep_ll_perf table");
  TableGrid::Select select;
  select.text.emplace_back("op_name", "ll");
  select.number = {{"node_num", nodes}, {"hidden_size", hidden}, {"num_topk", topk}, {"num_experts", experts}};
  return grid("wideep_deepep_ll_perf", select, {"num_token"}, dispatch ? "dispatch_avg_t_s" : "combine_avg_t_s")
      ->at({tokens});
}

TableTime KernelQueries::collective(TableCollective op, Precision precision, double bytes, int gpus) {
  if (!tables_->has("nccl_perf")) return missing("no nccl_perf table");
  TableGrid::Select select;
  select.text.emplace_back("op_name", to_string(op));
  select.text.emplace_back("nccl_dtype", nccl_dtype(precision));
  const TableGrid* g = grid("nccl_perf", select, {"num_gpus", "message_size"});
  // message_size counts elements (AIConfigurator's collectors size their buffers so).
  const double elements = bytes / (precision == Precision::Fp8 ? 1.0 : 2.0);
  return g->at({static_cast<double>(gpus), elements});
}

TableTime KernelQueries::context_attention(Precision precision, int batch, int seq, int heads, int kv_heads,
                                           int head_dim) {
  if (!tables_->has("context_attention_perf")) return missing("no context_attention_perf table");
  TableGrid::Select select;
  // Assigned whole: GCC 12 warns falsely (-Warray-bounds) on a first emplace_back of a string pair here.
  select.text = {{"attn_dtype", "bfloat16"}, {"kv_cache_dtype", precision == Precision::Fp8 ? "fp8" : "bfloat16"}};
  select.number.emplace_back("head_dim", head_dim);
  // A prefill kernel's time follows its query heads at a given GQA group (query heads a kv head): the group
  // selected, the heads read between measured counts.
  select.ratio.push_back({"num_heads", "num_key_value_heads", static_cast<double>(heads) / kv_heads});
  select.number_if_present.emplace_back("window_size", 0);
  select.number_if_present.emplace_back("beam_width", 1);
  return attention_at("context_attention_perf", select, {"batch_size", "isl", "num_heads"},
                      {static_cast<double>(batch), static_cast<double>(seq), static_cast<double>(heads)});
}

TableTime KernelQueries::generation_attention(bool fp8_kv_cache, int batch, int context, int heads, int kv_heads,
                                              int head_dim) {
  if (!tables_->has("generation_attention_perf")) return missing("no generation_attention_perf table");
  TableGrid::Select select;
  select.text.emplace_back("kv_cache_dtype", fp8_kv_cache ? "fp8" : "bfloat16");
  select.number.emplace_back("head_dim", head_dim);
  select.ratio.push_back({"num_heads", "num_key_value_heads", static_cast<double>(heads) / kv_heads});
  select.number_if_present.emplace_back("window_size", 0);
  select.number_if_present.emplace_back("beam_width", 1);
  // AIConfigurator's decode rows: a sequence of isl 1 that has decoded `step` tokens, so isl + step in cache.
  select.number.emplace_back("isl", 1);
  return attention_at("generation_attention_perf", select, {"batch_size", "step", "num_heads"},
                      {static_cast<double>(batch), static_cast<double>(context - 1), static_cast<double>(heads)});
}

TableTime KernelQueries::attention_at(const std::string& kind, const TableGrid::Select& select,
                                      const std::vector<std::string>& axes, const std::vector<double>& at) {
  if (attention_sources_.empty()) return grid(kind, select, axes)->at(at);
  return fastest_kernel(*tables_->table(kind), kind, select, axes, at, false, attention_sources_);
}

std::vector<std::string> KernelQueries::attention_kernels() const {
  std::vector<std::string> out;
  for (const char* kind : {"context_attention_perf", "generation_attention_perf"}) {
    const KernelTable* table = tables_->table(kind);
    if (!table) continue;
    const int source = table->key_index("kernel_source");
    if (source < 0 || !table->key_is_text(source)) continue;
    for (const std::string& s : table->text_values(source))
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TableTime KernelQueries::custom_all_reduce(double bytes, int gpus) {
  const KernelTable* table = tables_->table("custom_allreduce_perf");
  if (!table) return missing("no custom_allreduce_perf table");
  TableGrid::Select select;
  select.text.emplace_back("op_name", "all_reduce");
  select.text.emplace_back("allreduce_dtype", "bfloat16");
  // The engine's kernels (CUDA-graph and eager launches) share the grid: a shape measured by both keeps the
  // faster, as an engine decoding under CUDA graphs runs.
  const TableGrid* g = grid("custom_allreduce_perf", select, {"num_gpus", "message_size"});
  return g->at({static_cast<double>(gpus), bytes / 2});
}

}  // namespace pw
