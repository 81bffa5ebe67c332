#pragma once
// Commands never write over one of their own inputs.
#include <string>
#include <vector>

namespace pw {

// BadInput "<option>: '<out>' is an input of this command; write the output to another file" when `out`
// is the same file as one of `inputs` (paths that do not exist, such as preset names, never match).
void check_output_path(const std::string& out, const std::vector<std::string>& inputs, const char* option);

}  // namespace pw
