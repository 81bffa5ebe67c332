#pragma once
// What tests look for in the text a command or a renderer printed.
#include <cstddef>
#include <string>

// How many times `what` occurs in `text` (overlapping occurrences counted).
inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }
