#include "core/json_text.hpp"

#include <cmath>
#include <initializer_list>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/checked_math.hpp"
#include "core/error.hpp"
#include "core/excerpt.hpp"
#include "core/units.hpp"
#include "core/work_estimate.hpp"

namespace pw {

namespace {

// Where the parser is, as the field names of messages give it ("layers[3].forward_s"): the parser's
// own errors for a number out of range name no place.
class JsonPath {
 public:
  void enter(bool array) { levels_.push_back({array, 0, {}}); }
  void leave() {
    levels_.pop_back();
    element_done();
  }
  void key(const std::string& k) { levels_.back().key = k; }
  void element_done() {
    if (!levels_.empty() && levels_.back().array) ++levels_.back().index;
  }
  std::string text() const {
    std::string out;
    for (const Level& l : levels_) {
      if (l.array) out += fmt::format("[{}]", l.index);
      else out += fmt::format("{}{}", out.empty() ? "" : ".", excerpt(l.key));
    }
    return out.empty() ? "the top level" : excerpt(out);
  }

 private:
  struct Level {
    bool array;
    size_t index;
    std::string key;
  };
  std::vector<Level> levels_;
};

// nlohmann's parser message with the text it last read (which may be a whole 2 MB string) cut short.
std::string short_parser_message(const std::string& message) {
  const std::string marker = "last read: '";
  const size_t start = message.find(marker);
  const size_t end = message.rfind('\'');
  if (start == std::string::npos || end < start + marker.size()) return message;
  const size_t token = start + marker.size();
  return message.substr(0, token) + excerpt(message.substr(token, end - token)) + message.substr(end);
}

}  // namespace

namespace {

// The first of parse_json_text's two passes: nlohmann's SAX events without building anything, to refuse
// nesting beyond kMaxJsonDepth (the recursive code that later walks or prints a value would overflow the
// stack) and to name the field of a malformed text or an out-of-range number. Not the parser's callback
// form: its end_object scans the whole enclosing array for discarded values, quadratic in the elements
// (100,001 layers took 3 s, 200 s under ASan).
class ShapeCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit ShapeCheck(const std::string& source) : source_(source) {}

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return enter(false); }
  bool key(string_t& k) override {
    path_.key(k);
    return true;
  }
  bool end_object() override { return leave(); }
  bool start_array(std::size_t) override { return enter(true); }
  bool end_array() override { return leave(); }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    if (e.id == 406) {
      // "number overflow parsing '1e400'": the one range error of parsing.
      const std::string message = e.what();
      const size_t open = message.find('\''), close = message.rfind('\'');
      const std::string number = open < close ? message.substr(open + 1, close - open - 1) : "a number";
      throw_bad_input("{}: {} is {}, beyond the range of a double (1.8e308); give a figure in the field's range",
                      source_, path_.text(), excerpt(number));
    }
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 2: <message>"; the byte
    // offset replaces the line/column prefix.
    std::string message = e.what();
    const auto colon = message.find(": ");
    if (colon != std::string::npos) message = message.substr(colon + 2);
    throw_bad_input("{}: malformed JSON at byte {}: {}", source_, position, short_parser_message(message));
  }

 private:
  bool value() {
    path_.element_done();
    return true;
  }
  bool enter(bool array) {
    if (++depth_ > kMaxJsonDepth)
      throw_bad_input("{}: values nest deeper than {} arrays and objects at {}; pipewright's files nest a few levels",
                      source_, kMaxJsonDepth, path_.text());
    path_.enter(array);
    return true;
  }
  bool leave() {
    --depth_;
    path_.leave();
    return true;
  }

  const std::string& source_;
  JsonPath path_;
  int depth_ = 0;
};

}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  ShapeCheck check(source);
  nlohmann::json::sax_parse(text, &check);
  // The text is well formed and shallow: the second pass cannot fail.
  return nlohmann::json::parse(text);
}

namespace {

// Whether `value` holds a number that is not finite; if so `where` is its field name below `value` ("" for
// `value` itself). The name is built on the way out, so a document without one allocates nothing.
template <typename Json>
bool find_non_finite(const Json& value, std::string& where) {
  if (value.is_number_float()) return !std::isfinite(value.template get<double>());
  const auto prefix = [&where](const std::string& step) {
    where = step + (where.empty() || where.front() == '[' ? "" : ".") + where;
    return true;
  };
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it)
      if (find_non_finite(it.value(), where)) return prefix(it.key());
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i)
      if (find_non_finite(value[i], where)) return prefix(fmt::format("[{}]", i));
  }
  return false;
}

template <typename Json>
std::string file_text(const Json& document, const std::string& what) {
  std::string field;
  if (find_non_finite(document, field))
    throw_runtime("{}: {} is not a finite number, which JSON cannot hold (it would be written as null and read back as "
                  "the default); nothing was written",
                  what, field.empty() ? "the top level" : excerpt(field));
  return document.dump(2) + "\n";
}

}  // namespace

std::string json_file_text(const nlohmann::json& document, const std::string& what) { return file_text(document, what); }
std::string json_file_text(const nlohmann::ordered_json& document, const std::string& what) {
  return file_text(document, what);
}

std::string json_excerpt(const nlohmann::json& value) {
  return excerpt(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string read_text_file(const std::string& path, const char* what, long max_bytes) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw_bad_input("{} file '{}' not found", what, path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_bad_input("{} file '{}' cannot be read", what, path);
  const auto too_large = [&](std::int64_t bytes) {
    throw_bad_input("{} file '{}' holds {} bytes, above the cap of {} ({}); the largest real inputs (a model of "
                    "100,000 explicit layers, a million scheduled actions) take about 30 MB",
                    what, path, with_commas(bytes), with_commas(max_bytes), format_bytes(static_cast<double>(max_bytes)));
  };
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > static_cast<std::uintmax_t>(max_bytes)) too_large(static_cast<std::int64_t>(size));
  // Read at most one chunk past the cap (a file may grow after its size is asked), so nothing larger is held.
  std::string text;
  if (!ec) text.reserve(size);
  char chunk[1 << 16];
  while (in && static_cast<long>(text.size()) <= max_bytes) {
    in.read(chunk, sizeof chunk);
    text.append(chunk, static_cast<size_t>(in.gcount()));
  }
  if (static_cast<long>(text.size()) > max_bytes) too_large(static_cast<std::int64_t>(text.size()));
  return text;
}

bool names_a_file(const std::string& name_or_path) {
  std::error_code ec;
  if (std::filesystem::exists(name_or_path, ec)) return true;
  return name_or_path.size() >= 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".json") == 0;
}

JsonFields::JsonFields(const nlohmann::json& object, std::string source, std::string prefix)
    : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {
  if (!object_.is_object()) {
    if (prefix_.empty()) throw_bad_input("{}: expected a JSON object, got {}", source_, json_excerpt(object_));
    throw_bad_input("{}: {} must be an object", source_, prefix_.substr(0, prefix_.size() - 1));
  }
}

void JsonFields::fail(const std::string& key, const std::string& problem) const {
  throw_bad_input("{}: {} {}", source_, name(key), problem);
}

const nlohmann::json* JsonFields::find(const std::string& key) const {
  const auto it = object_.find(key);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

const nlohmann::json& JsonFields::required(const std::string& key) const {
  const nlohmann::json* v = find(key);
  if (!v) throw_bad_input("{}: missing required field '{}'", source_, name(key));
  return *v;
}

namespace {
double as_number(const JsonFields& f, const std::string& key, const nlohmann::json& v) {
  if (!v.is_number()) f.fail(key, fmt::format("must be a number, got {}", json_excerpt(v)));
  const double x = v.get<double>();
  // A denormal divides into infinity (a 1e-310 TFLOP/s GPU makes every layer cost infinite).
  if (!is_normal_or_zero(x)) f.fail(key, fmt::format("is {}, below the smallest normal double; give 0 or at least 2.3e-308", x));
  return x;
}
long as_integer(const JsonFields& f, const std::string& key, const nlohmann::json& v) {
  const double x = as_number(f, key, v);
  if (std::floor(x) != x || std::fabs(x) > 9.0e15) f.fail(key, fmt::format("must be a whole number, got {}", x));
  return static_cast<long>(x);
}
}  // namespace

double JsonFields::number(const std::string& key) const { return as_number(*this, key, required(key)); }

std::optional<double> JsonFields::optional_number(const std::string& key) const {
  const nlohmann::json* v = find(key);
  if (!v) return std::nullopt;
  return as_number(*this, key, *v);
}

double JsonFields::positive_number(const std::string& key) const {
  const double x = number(key);
  if (!(x > 0)) fail(key, fmt::format("must be positive, got {}", x));
  return x;
}

double JsonFields::non_negative_number(const std::string& key, std::optional<double> fallback) const {
  const nlohmann::json* v = find(key);
  if (!v && fallback) return *fallback;
  const double x = v ? as_number(*this, key, *v) : number(key);
  if (!(x >= 0)) fail(key, fmt::format("must be non-negative, got {}", x));
  return x;
}

long JsonFields::positive_integer(const std::string& key) const {
  const long x = as_integer(*this, key, required(key));
  if (x <= 0) fail(key, fmt::format("must be positive, got {}", x));
  return x;
}

int JsonFields::positive_int(const std::string& key) const {
  const long x = positive_integer(key);
  if (x > 2147483647L) fail(key, fmt::format("must be at most 2147483647, got {}", x));
  return static_cast<int>(x);
}

int JsonFields::count(const std::string& key, long cap, const char* what) const {
  const long x = positive_integer(key);
  if (x > cap) fail(key, fmt::format("is {} {}, above the cap of {}; give at most {}", x, what, cap, cap));
  return static_cast<int>(x);
}

int JsonFields::dimension(const std::string& key, bool zero_allowed) const {
  const long x = zero_allowed ? non_negative_integer(key) : positive_integer(key);
  if (x > kMaxDimension)
    fail(key, fmt::format("is {}, above the cap of {} for a layer's size; give at most {}", x, kMaxDimension,
                          kMaxDimension));
  return static_cast<int>(x);
}

double JsonFields::figure(const std::string& key, const FigureRange& range, std::optional<double> fallback) const {
  const nlohmann::json* v = find(key);
  if (!v && fallback) return *fallback;
  const double x = v ? as_number(*this, key, *v) : number(key);
  if (!(x >= range.min && x <= range.max))
    fail(key, fmt::format("is {} {}; give a figure from {} to {} {}", x, range.unit, range.min, range.max, range.unit));
  return x;
}

double JsonFields::positive_figure(const std::string& key, const FigureRange& range) const {
  positive_number(key);
  return figure(key, range);
}

const nlohmann::json& JsonFields::array(const std::string& key, long cap, const char* what) const {
  const nlohmann::json& v = required(key);
  if (!v.is_array()) fail(key, fmt::format("must be an array of {}, got {}", what, json_excerpt(v)));
  if (v.size() > static_cast<size_t>(cap))
    fail(key, fmt::format("has {} {}, above the cap of {}; give at most {}", v.size(), what, cap, cap));
  return v;
}

std::optional<long> JsonFields::optional_positive_integer(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return positive_integer(key);
}

long JsonFields::non_negative_integer(const std::string& key) const {
  const long x = as_integer(*this, key, required(key));
  if (x < 0) fail(key, fmt::format("must be non-negative, got {}", x));
  return x;
}

std::vector<int> JsonFields::indices(const std::string& key, int count) const {
  std::vector<int> out;
  for (const nlohmann::json& v : array(key, kMaxLayers, "layers")) {
    if (!v.is_number_integer() || v.get<long>() < 0 || v.get<long>() >= count)
      fail(key, fmt::format("holds {}; give block indices from 0 to {}", json_excerpt(v), count - 1));
    out.push_back(v.get<int>());
  }
  return out;
}

bool JsonFields::boolean(const std::string& key, bool fallback) const {
  const nlohmann::json* v = find(key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(key, fmt::format("must be true or false, got {}", json_excerpt(*v)));
  return v->get<bool>();
}

std::string JsonFields::string(const std::string& key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_string()) fail(key, fmt::format("must be a string, got {}", json_excerpt(v)));
  const std::string& text = v.get_ref<const std::string&>();
  // Names, paths and shapes: longer ones would only be carried into every message and table.
  if (text.size() > 4096)
    fail(key, fmt::format("is {}, longer than 4096 bytes; give a shorter string", excerpt(text)));
  return text;
}

std::optional<std::string> JsonFields::optional_string(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return string(key);
}

void JsonFields::reject_unknown(std::initializer_list<const char*> known) const {
  for (const auto& [key, value] : object_.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (ok) continue;
    std::string list;
    for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    throw_bad_input("{}: unknown field '{}'; known fields: {}", source_, excerpt(name(key)), list);
  }
}

JsonFields JsonFields::object(const std::string& key) const {
  return JsonFields(required(key), source_, name(key) + ".");
}

}  // namespace pw
