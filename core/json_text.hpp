#pragma once
// Reading pipewright's JSON inputs (models, clusters) with one style of error: the file, the
// dotted field name ("layers[3].forward_s", "gpu.peak_tflops") and what is wrong with it.
#include <nlohmann/json.hpp>

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/file_caps.hpp"

namespace pw {

// Arrays and objects nest at most this deep in any file pipewright reads (its own nest 6 deep): deeper
// values are refused while parsing, so that nothing that walks a value recurses without bound.
inline constexpr int kMaxJsonDepth = 64;

// Parses `text`. BadInput "<source>: malformed JSON at byte N: <parser message>" when it is not JSON,
// and naming the field when a number is beyond a double's range or values nest deeper than kMaxJsonDepth.
nlohmann::json parse_json_text(const std::string& text, const std::string& source);

// A document pipewright writes for itself to read again (models, clusters, plans, profiles, calibrations,
// schedules), two-space indented with a final newline. Runtime error naming the field when a number is not
// finite: JSON has no infinity, and nlohmann would write null, which reads back as the default.
std::string json_file_text(const nlohmann::json& document, const std::string& what);
std::string json_file_text(const nlohmann::ordered_json& document, const std::string& what);

// A value as an error message may quote it: its JSON text, cut short when long (core/excerpt.hpp).
std::string json_excerpt(const nlohmann::json& value);

// The whole file; BadInput "<what> file '<path>' not found" when it does not exist, and naming the cap
// when it holds more than `max_bytes` (nothing past the cap is read).
std::string read_text_file(const std::string& path, const char* what, long max_bytes = kMaxInputFileBytes);

// A command-line argument names a file (rather than a preset) when it exists or ends in ".json".
bool names_a_file(const std::string& name_or_path);

// The fields of one JSON object. `prefix` is prepended to field names in messages ("layers[3].").
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string source, std::string prefix = "");

  const std::string& source() const { return source_; }
  std::string name(const std::string& key) const { return prefix_ + key; }
  // The value, or nullptr when the key is absent or null (JSON null means "use the default").
  const nlohmann::json* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  const nlohmann::json& required(const std::string& key) const;

  double number(const std::string& key) const;
  std::optional<double> optional_number(const std::string& key) const;
  double positive_number(const std::string& key) const;
  double non_negative_number(const std::string& key, std::optional<double> fallback = std::nullopt) const;
  long positive_integer(const std::string& key) const;
  int positive_int(const std::string& key) const;  // positive_integer that fits an int
  // A positive whole number of `what` up to `cap` (a count read from a file: layers, ranks).
  int count(const std::string& key, long cap, const char* what) const;
  // A layer's size (width, heads, head size, latent rank) up to kMaxDimension; 0 allowed with `zero_allowed`.
  int dimension(const std::string& key, bool zero_allowed = false) const;
  // A physical figure within `range` (core/file_caps.hpp); `fallback` when absent.
  double figure(const std::string& key, const FigureRange& range, std::optional<double> fallback = std::nullopt) const;
  // The same, and above 0 (BadInput "must be positive" first).
  double positive_figure(const std::string& key, const FigureRange& range) const;
  // A required array of at most `cap` entries.
  const nlohmann::json& array(const std::string& key, long cap, const char* what) const;
  std::optional<long> optional_positive_integer(const std::string& key) const;
  // A required array of indices into `count` things (layers, blocks): BadInput "holds <value>; give block
  // indices from 0 to count - 1" for any other entry.
  std::vector<int> indices(const std::string& key, int count) const;
  long non_negative_integer(const std::string& key) const;
  bool boolean(const std::string& key, bool fallback) const;
  std::string string(const std::string& key) const;
  std::optional<std::string> optional_string(const std::string& key) const;
  JsonFields object(const std::string& key) const;  // required nested object

  // BadInput naming the first key not in `known` (a misspelt field would otherwise be ignored).
  void reject_unknown(std::initializer_list<const char*> known) const;

  [[noreturn]] void fail(const std::string& key, const std::string& problem) const;

 private:
  const nlohmann::json& object_;
  std::string source_;
  std::string prefix_;
};

}  // namespace pw
