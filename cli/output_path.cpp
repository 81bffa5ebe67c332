#include "cli/output_path.hpp"

#include <filesystem>

#include "core/error.hpp"

namespace pw {
namespace {

namespace fs = std::filesystem;

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, ec), ec);
  const fs::path cb = fs::weakly_canonical(fs::absolute(b, ec), ec);
  return ca == cb;
}

bool existing_same_file(const std::string& out, const std::string& in) {
  std::error_code ec;
  return fs::exists(in, ec) && fs::exists(out, ec) && fs::equivalent(in, out, ec);
}

}  // namespace

void check_outputs(const std::vector<OptionPath>& outputs, const std::vector<OptionPath>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const OptionPath& out = outputs[i];
    if (out.path.empty()) continue;
    std::error_code ec;
    if (fs::is_directory(out.path, ec))
      throw_bad_input("{}: '{}' is a folder; give a file name", out.option, out.path);
    const fs::path folder = fs::path(out.path).parent_path();
    if (!folder.empty() && !fs::is_directory(folder, ec)) {
      // Made when the file is written, if what exists of it is a folder.
      fs::path existing = folder;
      while (!existing.empty() && !fs::exists(existing, ec)) existing = existing.parent_path();
      if (!existing.empty() && !fs::is_directory(existing, ec))
        throw_bad_input("{}: the folder '{}' cannot be made: '{}' is a file; write '{}' elsewhere", out.option,
                        folder.string(), existing.string(), fs::path(out.path).filename().string());
    }
    for (const OptionPath& in : inputs)
      if (!in.path.empty() && existing_same_file(out.path, in.path))
        throw_bad_input("{}: '{}' is an input of this command ({}); write the output to another file", out.option,
                        out.path, in.option);
    for (size_t j = 0; j < i; ++j)
      if (!outputs[j].path.empty() && same_file(out.path, outputs[j].path))
        throw_bad_input("{}: '{}' is also the {} output; give each output its own file", out.option, out.path,
                        outputs[j].option);
  }
}

}  // namespace pw
