#include "kernels/kernel_table.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.hpp"
#include "core/json_text.hpp"

namespace pw {
namespace {

// The header every file of the format starts with.
void check_format(const JsonFields& f) {
  const nlohmann::json& format = f.required("format");
  if (!format.is_string() || format.get<std::string>() != kKernelTableFormat)
    throw_bad_input("{}: format is {}, not \"{}\"; this is not a pipewright kernel table", f.source(),
                    json_excerpt(format), kKernelTableFormat);
  const nlohmann::json& version = f.required("format_version");
  if (!version.is_number_integer() || version.get<long>() != kKernelTableFormatVersion)
    throw_bad_input("{}: format_version is {}; this pipewright reads version {} (re-import the tables)", f.source(),
                    json_excerpt(version), kKernelTableFormatVersion);
}

std::vector<std::string> names(const JsonFields& f, const std::string& key) {
  const nlohmann::json& list = f.required(key);
  if (!list.is_array() || list.empty()) throw_bad_input("{}: {} must be a non-empty list of names", f.source(), key);
  if (static_cast<long>(list.size()) > kMaxKernelTableColumns)
    throw_bad_input("{}: {} lists {} columns; at most {}", f.source(), key, list.size(), kMaxKernelTableColumns);
  std::vector<std::string> out;
  for (const nlohmann::json& n : list) {
    if (!n.is_string() || n.get<std::string>().empty())
      throw_bad_input("{}: {} must hold column names, got {}", f.source(), key, json_excerpt(n));
    out.push_back(n.get<std::string>());
  }
  return out;
}

std::string text_field(const JsonFields& f, const std::string& key) {
  const nlohmann::json& v = f.required(key);
  if (!v.is_string()) throw_bad_input("{}: {} must be text, got {}", f.source(), key, json_excerpt(v));
  return v.get<std::string>();
}

}  // namespace

KernelTable KernelTable::load(const std::string& path) {
  const nlohmann::json doc = parse_json_text(read_text_file(path, "kernel table"), path);
  const JsonFields f(doc, path);
  check_format(f);
  KernelTable t;
  t.path_ = path;
  t.kind_ = text_field(f, "kind");
  t.keys_ = names(f, "keys");
  t.times_ = names(f, "times");
  for (const std::string& k : t.keys_)
    if (std::count(t.keys_.begin(), t.keys_.end(), k) > 1 || std::count(t.times_.begin(), t.times_.end(), k) > 0)
      throw_bad_input("{}: column '{}' is named twice", path, k);
  const nlohmann::json& rows = f.required("rows");
  if (!rows.is_array()) throw_bad_input("{}: rows must be a list", path);
  if (static_cast<long>(rows.size()) > kMaxKernelTableRows)
    throw_bad_input("{}: {} rows; at most {}", path, rows.size(), kMaxKernelTableRows);
  const size_t nk = t.keys_.size(), nt = t.times_.size();
  t.rows_ = static_cast<long>(rows.size());
  t.text_.assign(nk, false);
  t.numbers_.assign(nk, {});
  t.text_ids_.assign(nk, {});
  t.dictionary_.assign(nk, {});
  t.seconds_.assign(nt, std::vector<double>(rows.size()));
  std::vector<std::map<std::string, int>> ids(nk);
  for (size_t r = 0; r < rows.size(); ++r) {
    const nlohmann::json& row = rows[r];
    // Rows are counted from 1, as a person reads them.
    if (!row.is_array() || row.size() != nk + nt)
      throw_bad_input("{} row {}: {} values, expected {} ({} keys and {} times)", path, r + 1,
                      row.is_array() ? row.size() : 0, nk + nt, nk, nt);
    for (size_t c = 0; c < nk; ++c) {
      const nlohmann::json& v = row[c];
      if (r == 0) {
        t.text_[c] = v.is_string();
        if (t.text_[c])
          t.text_ids_[c].reserve(rows.size());
        else
          t.numbers_[c].reserve(rows.size());
      }
      if (t.text_[c]) {
        if (!v.is_string())
          throw_bad_input("{} row {}: '{}' is {}, where the first row holds text", path, r + 1, t.keys_[c],
                          json_excerpt(v));
        const std::string& s = v.get_ref<const std::string&>();
        auto [it, added] = ids[c].emplace(s, static_cast<int>(t.dictionary_[c].size()));
        if (added) t.dictionary_[c].push_back(s);
        t.text_ids_[c].push_back(it->second);
      } else {
        if (!v.is_number() || v.is_boolean())
          throw_bad_input("{} row {}: '{}' is {}, where the first row holds a number", path, r + 1, t.keys_[c],
                          json_excerpt(v));
        t.numbers_[c].push_back(v.get<double>());
      }
    }
    for (size_t c = 0; c < nt; ++c) {
      const nlohmann::json& v = row[nk + c];
      const double s = v.is_number() ? v.get<double>() : -1;
      if (!v.is_number() || !std::isfinite(s) || s < 0 || s > 1e6)
        throw_bad_input("{} row {}: {} is {}, not a time in seconds (0 to 1e6)", path, r + 1, t.times_[c],
                        json_excerpt(v));
      t.seconds_[c][r] = s;
    }
  }
  return t;
}

int KernelTable::key_index(const std::string& name) const {
  const auto it = std::find(keys_.begin(), keys_.end(), name);
  return it == keys_.end() ? -1 : static_cast<int>(it - keys_.begin());
}

int KernelTable::time_index(const std::string& name) const {
  const auto it = std::find(times_.begin(), times_.end(), name);
  return it == times_.end() ? -1 : static_cast<int>(it - times_.begin());
}

const std::string& KernelTable::text(int key, long row) const {
  const auto k = static_cast<size_t>(key);
  return dictionary_[k][static_cast<size_t>(text_ids_[k][static_cast<size_t>(row)])];
}

std::shared_ptr<KernelTables> KernelTables::open(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool folder = fs::is_directory(path, ec);
  const std::string manifest = folder ? (fs::path(path) / "manifest.json").string() : path;
  if (folder && !fs::is_regular_file(manifest, ec))
    throw_bad_input("--kernels: '{}' has no manifest.json; give a folder `pipewright kernels import` or `profile "
                    "--kernels-out` wrote",
                    path);
  const nlohmann::json doc = parse_json_text(read_text_file(manifest, "kernel tables manifest"), manifest);
  const JsonFields f(doc, manifest);
  check_format(f);
  auto t = std::make_shared<KernelTables>();
  t->folder_ = fs::path(manifest).parent_path().string();
  t->system_ = text_field(f, "system");
  t->software_ = text_field(f, "software");
  if (const nlohmann::json* v = f.find("versions")) {
    if (!v->is_object()) throw_bad_input("{}: versions must be an object of names and versions", manifest);
    for (auto it = v->begin(); it != v->end(); ++it)
      if (it->is_string()) t->versions_[it.key()] = it->get<std::string>();
  }
  if (const nlohmann::json* s = f.find("source")) {
    if (s->is_object() && s->contains("name") && (*s)["name"].is_string()) {
      t->source_ = (*s)["name"].get<std::string>();
      if (s->contains("package") && (*s)["package"].is_string()) t->source_ += " (" + (*s)["package"].get<std::string>() + ")";
    }
  }
  const nlohmann::json& tables = f.required("tables");
  if (!tables.is_array()) throw_bad_input("{}: tables must be a list", manifest);
  if (static_cast<long>(tables.size()) > kMaxKernelTables)
    throw_bad_input("{}: {} tables; at most {}", manifest, tables.size(), kMaxKernelTables);
  for (size_t i = 0; i < tables.size(); ++i) {
    const JsonFields e(tables[i], manifest, fmt::format("tables[{}].", i));
    KernelTableEntry entry;
    entry.kind = text_field(e, "kind");
    entry.file = text_field(e, "file");
    if (entry.file.find('/') != std::string::npos || entry.file == "..")
      throw_bad_input("{}: tables[{}].file '{}' must name a file beside the manifest", manifest, i, entry.file);
    entry.rows = e.count("rows", kMaxKernelTableRows, "rows");
    if (const nlohmann::json* from = e.find("from"); from && from->is_string()) entry.from = from->get<std::string>();
    if (t->has(entry.kind)) throw_bad_input("{}: tables[{}]: the kind '{}' is listed twice", manifest, i, entry.kind);
    t->entries_.push_back(entry);
  }
  return t;
}

bool KernelTables::has(const std::string& kind) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const KernelTableEntry& e) { return e.kind == kind; });
}

const KernelTable* KernelTables::table(const std::string& kind) {
  if (auto it = loaded_.find(kind); it != loaded_.end()) return it->second.get();
  const auto entry = std::find_if(entries_.begin(), entries_.end(), [&](const KernelTableEntry& e) { return e.kind == kind; });
  if (entry == entries_.end()) return nullptr;
  auto table = std::make_unique<KernelTable>(
      KernelTable::load((std::filesystem::path(folder_) / entry->file).string()));
  if (table->kind() != kind)
    throw_bad_input("{}: holds the kind '{}', the manifest says '{}'", table->path(), table->kind(), kind);
  if (table->rows() != entry->rows)
    throw_bad_input("{}: {} rows, the manifest says {}; the folder was changed after it was written", table->path(),
                    table->rows(), entry->rows);
  return loaded_.emplace(kind, std::move(table)).first->second.get();
}

}  // namespace pw
