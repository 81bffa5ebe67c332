#include "core/excerpt.hpp"

#include <fmt/format.h>

namespace pw {

namespace {
constexpr size_t kShown = 40;       // bytes of a long text that are quoted
constexpr size_t kWhole = 60;       // texts up to this long are quoted whole

std::string one_line(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
    else out += c;
  }
  return out;
}
}  // namespace

std::string excerpt(const std::string& text) {
  if (text.size() <= kWhole) return one_line(text);
  size_t cut = kShown;
  // Not in the middle of a UTF-8 sequence: continuation bytes are 10xxxxxx.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return fmt::format("{}... ({} bytes)", one_line(text.substr(0, cut)), text.size());
}

}  // namespace pw
