#pragma once
// Runs one of pipewright's Python modules (python/pipewright/...) for what C++ cannot read without a
// library Debian does not have (AIConfigurator's parquet tables need pyarrow). The interpreter is
// $PIPEWRIGHT_PYTHON, else the one the pipewright module runs in (use_python_interpreter), else the .venv
// scripts/install-deps.sh made in the source tree when it was configured, else the python3 beside this
// program (an environment pip installed it into), else python3 on the PATH; the source tree's python/,
// where it exists, goes first on PYTHONPATH.
#include <ostream>
#include <string>
#include <vector>

namespace pw {

// Runs `python -m module args...`, forwarding its standard output to `out`. Exit 0: returns. Exit 2: the
// module's one-line `error: ...` becomes a BadInput error with that line; any other exit (1: this machine
// lacks something) a Runtime error with the module's last line, as does an interpreter that cannot start.
void run_python_module(const std::string& module, const std::vector<std::string>& args, std::ostream& out);

// The pipewright module (python/src/core_module.cpp) names the interpreter it was imported into.
void use_python_interpreter(const std::string& path);

// The interpreter run_python_module uses.
std::string python_interpreter();

}  // namespace pw
