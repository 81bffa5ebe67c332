// libFuzzer's entry point for the one target this program is built for (PIPEWRIGHT_FUZZ_TARGET, set by
// cmake/fuzz.cmake). The harness lets only what is not a pw::Error out; that is a finding, so it aborts with
// the exception's text, which libFuzzer then records with the input.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <typeinfo>

#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    pw::fuzz::PIPEWRIGHT_FUZZ_TARGET(data, size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pipewright fuzz: %s left the reader: %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "pipewright fuzz: a non-std exception left the reader\n");
    std::abort();
  }
  return 0;
}
