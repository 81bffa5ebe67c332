#include "kernels/table_compare.hpp"

#include "kernels/kernel_queries.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace pw {
namespace {

bool names_a_kernel(const std::string& key) { return key == "kernel_source" || key == "backend"; }

// A table's rows by group (its shared text keys) and shape (its shared numeric keys): the fastest time of each.
using Shapes = std::map<std::string, std::map<std::vector<double>, double>>;

Shapes shapes_of(const KernelTable& t, const std::vector<std::string>& text, const std::vector<std::string>& numbers) {
  std::vector<int> text_index, number_index;
  for (const std::string& k : text) text_index.push_back(t.key_index(k));
  for (const std::string& k : numbers) number_index.push_back(t.key_index(k));
  const int time = t.time_index("time_s") >= 0 ? t.time_index("time_s") : 0;
  Shapes out;
  std::vector<double> shape(numbers.size());
  for (long r = 0; r < t.rows(); ++r) {
    std::string group;
    for (size_t i = 0; i < text.size(); ++i)
      group += fmt::format("{}{}={}", i ? ", " : "", text[i], t.text(text_index[i], r));
    for (size_t i = 0; i < numbers.size(); ++i) shape[i] = t.number(number_index[i], r);
    const double s = t.seconds(time, r);
    auto [it, added] = out[group].emplace(shape, s);
    if (!added) it->second = std::min(it->second, s);
  }
  return out;
}

double nearest_rank(const std::vector<double>& sorted, double fraction) {
  const size_t rank = static_cast<size_t>(std::ceil(fraction * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

// B read at A's GEMM shapes of `dtype`, through the cost model's query.
KindComparison read_at(const KernelTable& ta, KernelQueries& qb, const std::string& dtype) {
  KindComparison c{"gemm_perf", fmt::format("gemm_dtype={}, B read at A's shapes", dtype), 0, 0, 0, 0};
  const int d = ta.key_index("gemm_dtype"), m = ta.key_index("m"), n = ta.key_index("n"), k = ta.key_index("k");
  if (d < 0 || m < 0 || n < 0 || k < 0 || !ta.key_is_text(d)) return c;
  const int time = ta.time_index("time_s") >= 0 ? ta.time_index("time_s") : 0;
  std::vector<double> ratios;
  for (long r = 0; r < ta.rows(); ++r) {
    if (ta.text(d, r) != dtype || !(ta.seconds(time, r) > 0)) continue;
    const TableTime t = qb.gemm(dtype == "fp8" ? Precision::Fp8 : Precision::Bf16, ta.number(m, r), ta.number(n, r),
                                ta.number(k, r));
    if (t.found()) ratios.push_back(t.seconds / ta.seconds(time, r));
  }
  if (ratios.empty()) return c;
  std::sort(ratios.begin(), ratios.end());
  c.shapes = static_cast<long>(ratios.size());
  c.median = nearest_rank(ratios, 0.5);
  c.p10 = nearest_rank(ratios, 0.1);
  c.p90 = nearest_rank(ratios, 0.9);
  return c;
}

}  // namespace

std::vector<KindComparison> compare_tables(const std::shared_ptr<KernelTables>& a_tables,
                                           const std::shared_ptr<KernelTables>& b_tables) {
  KernelTables& a = *a_tables;
  KernelTables& b = *b_tables;
  KernelQueries qb(b_tables);
  std::vector<KindComparison> out;
  for (const KernelTableEntry& e : a.entries()) {
    if (!b.has(e.kind)) continue;
    const KernelTable* ta = a.table(e.kind);
    const KernelTable* tb = b.table(e.kind);
    std::vector<std::string> text, numbers;
    for (const std::string& k : ta->keys()) {
      const int ia = ta->key_index(k), ib = tb->key_index(k);
      if (ib < 0 || names_a_kernel(k) || ta->key_is_text(ia) != tb->key_is_text(ib)) continue;
      (ta->key_is_text(ia) ? text : numbers).push_back(k);
    }
    const Shapes sa = shapes_of(*ta, text, numbers), sb = shapes_of(*tb, text, numbers);
    bool any = false;
    for (const auto& [group, shapes] : sa) {
      const auto other = sb.find(group);
      if (other == sb.end()) continue;
      std::vector<double> ratios;
      for (const auto& [shape, s] : shapes) {
        const auto it = other->second.find(shape);
        if (it != other->second.end() && s > 0) ratios.push_back(it->second / s);
      }
      if (ratios.empty()) continue;
      std::sort(ratios.begin(), ratios.end());
      out.push_back({e.kind, group, static_cast<long>(ratios.size()), nearest_rank(ratios, 0.5),
                     nearest_rank(ratios, 0.1), nearest_rank(ratios, 0.9)});
      any = true;
    }
    if (!any) out.push_back({e.kind, "", 0, 0, 0, 0});
    if (e.kind == "gemm_perf")
      for (const char* dtype : {"bfloat16", "fp8"}) {
        const KindComparison c = read_at(*ta, qb, dtype);
        if (c.shapes > 0) out.push_back(c);
      }
  }
  return out;
}

}  // namespace pw
