#pragma once
#include <ostream>

namespace pw {
// Runs the pipewright command line; returns the exit code (0 ok, 1 runtime failure, 2 bad input).
int cli_main(int argc, char** argv, std::ostream& out, std::ostream& err);
}  // namespace pw
