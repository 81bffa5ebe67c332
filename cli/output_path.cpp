#include "cli/output_path.hpp"

#include <filesystem>

#include "core/error.hpp"

namespace pw {

void check_output_path(const std::string& out, const std::vector<std::string>& inputs, const char* option) {
  namespace fs = std::filesystem;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (!in.empty() && fs::exists(in, ec) && fs::exists(out, ec) && fs::equivalent(in, out, ec))
      throw_bad_input("{}: '{}' is an input of this command; write the output to another file", option, out);
  }
}

}  // namespace pw
