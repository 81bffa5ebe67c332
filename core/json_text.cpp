#include "core/json_text.hpp"

#include <cmath>
#include <initializer_list>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"

namespace pw {

nlohmann::json parse_json_text(const std::string& text, const std::string& source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 2: <message>";
    // the byte offset replaces the line/column prefix.
    std::string message = e.what();
    const auto colon = message.find(": ");
    if (colon != std::string::npos) message = message.substr(colon + 2);
    throw_bad_input("{}: malformed JSON at byte {}: {}", source, e.byte, message);
  }
}

std::string read_text_file(const std::string& path, const char* what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw_bad_input("{} file '{}' not found", what, path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_bad_input("{} file '{}' cannot be read", what, path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool names_a_file(const std::string& name_or_path) {
  std::error_code ec;
  if (std::filesystem::exists(name_or_path, ec)) return true;
  return name_or_path.size() >= 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".json") == 0;
}

JsonFields::JsonFields(const nlohmann::json& object, std::string source, std::string prefix)
    : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {
  if (!object_.is_object()) {
    if (prefix_.empty()) throw_bad_input("{}: expected a JSON object, got {}", source_, object_.dump());
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
  if (!v.is_number()) f.fail(key, fmt::format("must be a number, got {}", v.dump()));
  return v.get<double>();
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

std::optional<long> JsonFields::optional_positive_integer(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return positive_integer(key);
}

long JsonFields::non_negative_integer(const std::string& key) const {
  const long x = as_integer(*this, key, required(key));
  if (x < 0) fail(key, fmt::format("must be non-negative, got {}", x));
  return x;
}

bool JsonFields::boolean(const std::string& key, bool fallback) const {
  const nlohmann::json* v = find(key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(key, fmt::format("must be true or false, got {}", v->dump()));
  return v->get<bool>();
}

std::string JsonFields::string(const std::string& key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_string()) fail(key, fmt::format("must be a string, got {}", v.dump()));
  return v.get<std::string>();
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
    throw_bad_input("{}: unknown field '{}'; known fields: {}", source_, name(key), list);
  }
}

JsonFields JsonFields::object(const std::string& key) const {
  return JsonFields(required(key), source_, name(key) + ".");
}

}  // namespace pw
