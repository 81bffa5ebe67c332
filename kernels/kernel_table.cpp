#include "kernels/kernel_table.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.hpp"
#include "core/excerpt.hpp"
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

// Reads a table file in one pass of SAX events: the small fields into a JSON object, the rows straight into
// the table's columns (a GEMM table holds about 750,000 values: a DOM of them took 0.2 s to build, most of a
// plan's extra time with tables). Rows that come before `keys` and `times` (a writer that sorts its fields)
// are kept as they are and read at the end.
class TableReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  TableReader(KernelTable::Columns& t, std::string path) : t_(t), path_(std::move(path)) {}

  nlohmann::json header = nlohmann::json::object();

  bool null() override { return scalar(nlohmann::json(nullptr)); }
  bool boolean(bool v) override { return scalar(nlohmann::json(v)); }
  bool number_integer(number_integer_t v) override { return number(static_cast<double>(v), nlohmann::json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return number(static_cast<double>(v), nlohmann::json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return number(v, nlohmann::json(v)); }
  bool string(string_t& v) override {
    if (in_row()) return row_text(v);
    if (in_rows_) throw_bad_input("{}: rows must be a list of rows, each a list of values", path_);
    return string_value(v);
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t n) override {
    if (++depth_ > kMaxJsonDepth) too_deep();
    if (depth_ == 1) return true;
    if (in_rows() && depth_ >= 3) fail_row_value("an object");
    if (in_rows()) throw_bad_input("{}: rows must be a list of rows, each a list of values", path_);
    return forward([&](auto& dom) { return dom.start_object(n); });
  }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      key_ = k;
      if (key_ == "rows") start_rows();
      else dom_ = std::make_unique<Dom>(value_);
      return true;
    }
    return forward([&](auto& dom) { return dom.key(k); });
  }
  bool end_object() override {
    if (depth_-- == 1) return true;
    return forward([&](auto& dom) { return dom.end_object(); }) && finish_value();
  }
  bool start_array(std::size_t n) override {
    if (++depth_ > kMaxJsonDepth) too_deep();
    if (in_rows()) {
      if (depth_ == 2) return true;  // the list of rows
      if (depth_ == 3) return start_row();
      fail_row_value("a list");
    }
    return forward([&](auto& dom) { return dom.start_array(n); });
  }
  bool end_array() override {
    const int d = depth_--;
    if (in_rows_) {
      if (d == 3) return end_row();
      if (d == 2) {
        in_rows_ = false;
        return true;
      }
    }
    return forward([&](auto& dom) { return dom.end_array(); }) && finish_value();
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    std::string message = e.what();
    const auto colon = message.find(": ");
    if (colon != std::string::npos) message = message.substr(colon + 2);
    throw_bad_input("{}: malformed JSON at byte {}: {}", path_, position, excerpt(message));
  }
  void finish() {
    if (!saw_rows_) throw_bad_input("{}: missing required field 'rows'", path_);
    if (pending_.empty() && !buffering_) return;
    buffering_ = false;
    set_up_columns();
    for (const std::vector<nlohmann::json>& row : pending_) {
      start_row();
      for (const nlohmann::json& v : row) {
        if (v.is_string()) row_text(v.get<std::string>());
        else if (v.is_number()) row_number(v.get<double>(), v);
        else row_other(v);
      }
      end_row();
    }
  }

 private:
  using Dom = nlohmann::detail::json_sax_dom_parser<nlohmann::json>;

  bool in_rows() const { return in_rows_; }
  bool in_row() const { return in_rows_ && depth_ == 3; }
  [[noreturn]] void too_deep() const {
    throw_bad_input("{}: values nest deeper than {} arrays and objects; pipewright's files nest a few levels", path_,
                    kMaxJsonDepth);
  }
  template <typename F>
  bool forward(F&& f) {
    if (!dom_) throw_bad_input("{}: expected a JSON object of fields", path_);
    return f(*dom_);
  }
  // A top-level field's value is whole once its events return to depth 1.
  bool finish_value() {
    if (depth_ == 1 && dom_) {
      header[key_] = std::move(value_);
      value_ = nlohmann::json();
      dom_.reset();
    }
    return true;
  }
  bool scalar(const nlohmann::json& v) {
    if (in_row()) return row_other(v);
    if (in_rows_) throw_bad_input("{}: rows must be a list of rows, each a list of values", path_);
    if (depth_ == 0) throw_bad_input("{}: expected a JSON object of fields, got {}", path_, json_excerpt(v));
    const bool ok = forward([&](auto& dom) {
      if (v.is_null()) return dom.null();
      return dom.boolean(v.get<bool>());
    });
    return ok && finish_value();
  }
  bool number(double x, const nlohmann::json& v) {
    if (in_row()) return row_number(x, v);
    if (in_rows_) throw_bad_input("{}: rows must be a list of rows, each a list of values", path_);
    const bool ok = forward([&](auto& dom) {
      if (v.is_number_float()) return dom.number_float(v.get<double>(), "");
      if (v.is_number_unsigned()) return dom.number_unsigned(v.get<std::uint64_t>());
      return dom.number_integer(v.get<std::int64_t>());
    });
    return ok && finish_value();
  }
  bool string_value(string_t& v) { return forward([&](auto& dom) { return dom.string(v); }) && finish_value(); }

  void start_rows() {
    saw_rows_ = true;
    in_rows_ = true;
    buffering_ = !header.contains("keys") || !header.contains("times");
    if (!buffering_) set_up_columns();
  }
  void set_up_columns() {
    const JsonFields f(header, path_);
    check_format(f);
    t_.kind = text_field(f, "kind");
    t_.keys = names(f, "keys");
    t_.times = names(f, "times");
    for (const std::string& k : t_.keys)
      if (std::count(t_.keys.begin(), t_.keys.end(), k) > 1 || std::count(t_.times.begin(), t_.times.end(), k) > 0)
        throw_bad_input("{}: column '{}' is named twice", path_, k);
    nk_ = t_.keys.size();
    nt_ = t_.times.size();
    t_.text.assign(nk_, false);
    t_.numbers.assign(nk_, {});
    t_.text_ids.assign(nk_, {});
    t_.dictionary.assign(nk_, {});
    t_.seconds.assign(nt_, {});
    ids_.assign(nk_, {});
  }
  bool start_row() {
    if (buffering_) {
      if (static_cast<long>(pending_.size()) >= kMaxKernelTableRows)
        throw_bad_input("{}: more than {} rows", path_, kMaxKernelTableRows);
      pending_.emplace_back();
      return true;
    }
    if (t_.rows >= kMaxKernelTableRows) throw_bad_input("{}: more than {} rows", path_, kMaxKernelTableRows);
    ++t_.rows;
    column_ = 0;
    return true;
  }
  bool end_row() {
    if (buffering_) return true;
    if (column_ != nk_ + nt_)
      throw_bad_input("{} row {}: {} values, expected {} ({} keys and {} times)", path_, t_.rows, column_, nk_ + nt_,
                      nk_, nt_);
    return true;
  }
  // The type of a key column is its first row's.
  bool first_row() const { return t_.rows == 1; }
  bool row_text(const std::string& v) {
    if (buffering_) return keep(nlohmann::json(v));
    const size_t c = column_++;
    if (c >= nk_) {
      if (c < nk_ + nt_) fail_time(c - nk_, nlohmann::json(v));
      return true;  // counted: end_row refuses the row
    }
    if (first_row()) t_.text[c] = true;
    if (!t_.text[c])
      throw_bad_input("{} row {}: '{}' is {}, where the first row holds a number", path_, t_.rows, t_.keys[c],
                      json_excerpt(nlohmann::json(v)));
    auto it = ids_[c].find(v);
    if (it == ids_[c].end()) {
      it = ids_[c].emplace(v, static_cast<int>(t_.dictionary[c].size())).first;
      t_.dictionary[c].push_back(v);
    }
    t_.text_ids[c].push_back(it->second);
    return true;
  }
  bool row_number(double x, const nlohmann::json& v) {
    if (buffering_) return keep(v);
    const size_t c = column_++;
    if (c >= nk_ + nt_) return true;
    if (c >= nk_) {
      if (!std::isfinite(x) || x < 0 || x > 1e6) fail_time(c - nk_, v);
      t_.seconds[c - nk_].push_back(x);
      return true;
    }
    if (t_.text[c])
      throw_bad_input("{} row {}: '{}' is {}, where the first row holds text", path_, t_.rows, t_.keys[c],
                      json_excerpt(v));
    t_.numbers[c].push_back(x);
    return true;
  }
  bool row_other(const nlohmann::json& v) {
    if (buffering_) return keep(v);
    const size_t c = column_++;
    if (c >= nk_ + nt_) return true;
    if (c >= nk_) fail_time(c - nk_, v);
    throw_bad_input("{} row {}: '{}' is {}, where the first row holds {}", path_, t_.rows, t_.keys[c], json_excerpt(v),
                    t_.text[c] ? "text" : "a number");
  }
  bool keep(const nlohmann::json& v) {
    if (pending_.back().size() > static_cast<size_t>(kMaxKernelTableColumns) * 2)
      throw_bad_input("{} row {}: more than {} values", path_, pending_.size(), kMaxKernelTableColumns * 2);
    pending_.back().push_back(v);
    return true;
  }
  [[noreturn]] void fail_time(size_t time, const nlohmann::json& v) const {
    throw_bad_input("{} row {}: {} is {}, not a time in seconds (0 to 1e6)", path_, t_.rows, t_.times[time],
                    json_excerpt(v));
  }
  [[noreturn]] void fail_row_value(const char* what) const {
    if (buffering_)
      throw_bad_input("{} row {}: value {} is {}, not a number or text", path_, pending_.size(),
                      pending_.back().size() + 1, what);
    throw_bad_input("{} row {}: value {} is {}, not a number or text", path_, t_.rows, column_ + 1, what);
  }

  KernelTable::Columns& t_;
  std::string path_;
  int depth_ = 0;
  std::string key_;
  nlohmann::json value_;
  std::unique_ptr<Dom> dom_;
  bool in_rows_ = false, saw_rows_ = false, buffering_ = false;
  std::vector<std::vector<nlohmann::json>> pending_;  // rows read before the columns were named
  size_t nk_ = 0, nt_ = 0, column_ = 0;
  std::vector<std::map<std::string, int>> ids_;
};

}  // namespace

KernelTable KernelTable::load(const std::string& path) {
  KernelTable t;
  t.path_ = path;
  const std::string text = read_text_file(path, "kernel table");
  Columns c;
  TableReader reader(c, path);
  nlohmann::json::sax_parse(text, &reader);
  reader.finish();
  t.kind_ = std::move(c.kind);
  t.keys_ = std::move(c.keys);
  t.times_ = std::move(c.times);
  t.rows_ = c.rows;
  t.text_ = std::move(c.text);
  t.numbers_ = std::move(c.numbers);
  t.text_ids_ = std::move(c.text_ids);
  t.dictionary_ = std::move(c.dictionary);
  t.seconds_ = std::move(c.seconds);
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
  if (const nlohmann::json* g = f.find("gpu")) {
    const JsonFields gpu(*g, manifest, "gpu.");
    if (const nlohmann::json* bw = gpu.find("hbm_bytes_per_s")) {
      if (!bw->is_number() || !(bw->get<double>() > 0 && bw->get<double>() < 1e15))
        throw_bad_input("{}: gpu.hbm_bytes_per_s must be a positive number of bytes a second", manifest);
      t->hbm_bytes_per_s_ = bw->get<double>();
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
