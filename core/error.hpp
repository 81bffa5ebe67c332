#pragma once
// The one error type of pipewright: a kind (bad input or runtime failure), a one-line message and,
// rarely, details: lines a person needs to see the fault (a schedule's grid with the bad cell
// marked), printed after the message. The CLI turns the kind into an exit code: bad input 2, runtime 1.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace pw {

enum class ErrorKind { BadInput, Runtime };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message, std::string details = "")
      : std::runtime_error(message), kind_(kind), details_(std::move(details)) {}
  ErrorKind kind() const { return kind_; }
  // Empty for most errors; otherwise lines that follow the message, without a final newline.
  const std::string& details() const { return details_; }

 private:
  ErrorKind kind_;
  std::string details_;
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
