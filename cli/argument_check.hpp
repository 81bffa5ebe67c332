#pragma once
// The command line is read twice: first here, for names, then by CLI11, for values. CLI11 checks
// required options before unknown ones, so `plan --modle x` would be answered "--model is required";
// here an unknown option or command is answered with the nearest valid name, and Megatron-LM's
// spellings of the same settings are taken for pipewright's.
#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace pw {

// A Megatron-LM argument that means exactly what a pipewright option means.
struct OptionAlias {
  std::string_view megatron;
  std::string_view pipewright;
};
const std::vector<OptionAlias>& megatron_aliases();

// The arguments after the program's name, with Megatron-LM's spellings replaced by pipewright's
// where the command has that option. Throws Error (bad input) naming an unknown option or command
// and the nearest valid one.
std::vector<std::string> checked_arguments(const CLI::App& root, const std::vector<std::string>& args);

// The name among `names` nearest to `given` (edit distance, a prefix counting as near), or "" when
// none is near enough to be what was meant.
std::string nearest_name(std::string_view given, const std::vector<std::string>& names);

}  // namespace pw
