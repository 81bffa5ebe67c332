#pragma once
// What an error message may quote of a value a file gave: a one-line excerpt, so that a 2 MB line
// or a string with newlines in it does not become the message.
#include <string>

namespace pw {

// `text` when it is short; otherwise its first 40 bytes, "..." and its length. Control characters
// are written as escapes (\n, \x01) so the excerpt stays on one line.
std::string excerpt(const std::string& text);

}  // namespace pw
