#pragma once
#include "core/error.hpp"

namespace pw::fuzz {

// Runs `read`; a pw::Error (bad input, or a runtime error naming what the wire got wrong) is a reader doing its
// job and ends here, anything else leaves as the bug it is.
template <typename Read>
void read_or_refuse(Read&& read) {
  try {
    read();
  } catch (const Error&) {
  }
}

}  // namespace pw::fuzz
