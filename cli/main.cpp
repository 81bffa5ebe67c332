#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli/cli.hpp"
#include "core/output_file.hpp"
#include "executor/stall_watch.hpp"

int main(int argc, char** argv) {
  pw::remove_temporaries_on_signals();
  const int code = pw::cli_main(argc, argv, std::cout, std::cerr);
  // A stalled rank thread is still running and may use what exit() would destroy: leave without it.
  if (pw::rank_threads_left_running() > 0) {
    std::cout.flush();
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}
