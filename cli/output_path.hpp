#pragma once
// Commands never write over one of their own inputs, nor two outputs to one file: every output path is
// checked before any work, so that a mistake costs nothing.
#include <string>
#include <vector>

namespace pw {

// A path and the option that gave it ("--trace", "--export-dir"); an empty path is an option not given.
struct OptionPath {
  std::string option;
  std::string path;
};

// An output's folder that does not exist is made when the file is written (write_output_file). BadInput
// when the output is itself a folder ("<option>: '<out>' is a folder; give a file name"), or when its folder
// cannot be made, part of its path being a file:
//   "<option>: the folder '<folder>' cannot be made: '<file>' is a file; write '<name>' elsewhere"
// when an output is the same file as an input (by filesystem identity; inputs that do not exist,
// such as preset names, never match):
//   "<option>: '<out>' is an input of this command (<input option>); write the output to another file"
// or when two outputs name one file (the same file, or the same path once made absolute):
//   "<option>: '<out>' is also the <other option> output; give each output its own file"
void check_outputs(const std::vector<OptionPath>& outputs, const std::vector<OptionPath>& inputs);

}  // namespace pw
