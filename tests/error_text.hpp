#pragma once
// What a call threw, as text: the message of a BadInput error, "runtime error: ..." for a runtime one,
// "no error" when it returned. Tests compare it with the exact message a user reads.
#include <string>

#include "core/error.hpp"

template <typename F>
std::string bad_input(F&& f) {
  try {
    f();
  } catch (const pw::Error& e) {
    return e.kind() == pw::ErrorKind::BadInput ? std::string(e.what()) : "runtime error: " + std::string(e.what());
  }
  return "no error";
}
