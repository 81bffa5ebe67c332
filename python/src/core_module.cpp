// pipewright._core: the command line run in-process. The Python functions (python/pipewright/_cli.py) turn
// keyword arguments into the command's options, so that both take the same settings, check them with the
// same code and answer with the same JSON and the same one-line errors.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cli/cli.hpp"
#include "cli/python_module.hpp"
#include "core/version.hpp"

namespace nb = nanobind;

namespace {

// Runs `pipewright ARGS...`; returns the exit code and what it printed to stdout and to stderr.
std::tuple<int, std::string, std::string> run_command(std::vector<std::string> args) {
  std::vector<char*> argv;
  std::string program = "pipewright";
  argv.push_back(program.data());
  for (std::string& a : args) argv.push_back(a.data());
  std::ostringstream out;
  std::ostringstream err;
  int code = 0;
  {
    // A plan search takes seconds on every core: other Python threads go on meanwhile.
    nb::gil_scoped_release released;
    code = pw::cli_main(static_cast<int>(argv.size()), argv.data(), out, err);
  }
  return {code, out.str(), err.str()};
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "pipewright's command line, run in-process";
  m.attr("__version__") = pw::kVersion;
  // `kernels import` runs pipewright's Python modules: in this interpreter, which has the package.
  pw::use_python_interpreter(nb::cast<std::string>(nb::module_::import_("sys").attr("executable")));
  m.def("run", &run_command, nb::arg("args"),
        "Runs `pipewright ARGS...` in this process; returns (exit code, stdout, stderr).");
}
