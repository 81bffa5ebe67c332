# PIPEWRIGHT_FUZZ builds one libFuzzer program per reader of outside input (tests/fuzz/; scripts/fuzz.sh runs
# them). libFuzzer comes with clang only. Everything is built with its coverage instrumentation and, unless
# PIPEWRIGHT_SANITIZE names others, under ASan and UBSan, so that a bad read or undefined behaviour is a
# finding rather than luck.
option(PIPEWRIGHT_FUZZ "Build the libFuzzer targets (clang only; see scripts/fuzz.sh)" OFF)
if(PIPEWRIGHT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "PIPEWRIGHT_FUZZ needs clang (libFuzzer ships with it), this build uses "
                        "${CMAKE_CXX_COMPILER_ID}: configure a fresh build folder with -DCMAKE_CXX_COMPILER=clang++ "
                        "(Debian: apt-get install clang libclang-rt-14-dev)")
  endif()
  if(NOT PIPEWRIGHT_BUILD_TESTS)
    message(FATAL_ERROR "PIPEWRIGHT_FUZZ needs PIPEWRIGHT_BUILD_TESTS=ON: the harnesses live in tests/fuzz/")
  endif()
  # Read by cmake/sanitizers.cmake, included next.
  if(NOT PIPEWRIGHT_SANITIZE)
    set(PIPEWRIGHT_SANITIZE "address,undefined")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
endif()

# A libFuzzer program for the harness function fuzz_<name> of tests/fuzz/fuzz_targets.hpp.
function(pipewright_add_fuzzer name)
  add_executable(fuzz_${name} ${PIPEWRIGHT_SOURCE_ROOT}/tests/fuzz/fuzz_main.cpp)
  target_compile_definitions(fuzz_${name} PRIVATE PIPEWRIGHT_FUZZ_TARGET=fuzz_${name})
  target_link_libraries(fuzz_${name} PRIVATE pipewright_fuzz_targets)
  target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
endfunction()
