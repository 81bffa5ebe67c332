#pragma once
// The one error type of pipewright: a kind (bad input or runtime failure) and a one-line message.
// The CLI turns the kind into an exit code: bad input 2, runtime 1.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace pw {

enum class ErrorKind { BadInput, Runtime };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Something the user gave is wrong: the message names the field and what would fix it.
template <typename... Args>
[[noreturn]] void throw_bad_input(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(ErrorKind::BadInput, fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void throw_runtime(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(ErrorKind::Runtime, fmt::format(f, std::forward<Args>(args)...));
}

inline int exit_code(ErrorKind kind) { return kind == ErrorKind::BadInput ? 2 : 1; }

}  // namespace pw
