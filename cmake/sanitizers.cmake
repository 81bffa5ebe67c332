# Builds everything under the sanitizers named in PIPEWRIGHT_SANITIZE: "address,undefined" (ASan and UBSan
# together) or "thread" (TSan, which excludes ASan). Empty: none. scripts/sanitizers.sh builds and runs both.
# A sanitizer report must fail the run, so UBSan does not recover (ASan and TSan stop or fail on their own,
# with the halt_on_error options the script sets).
set(PIPEWRIGHT_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined or thread (empty: none)")
set_property(CACHE PIPEWRIGHT_SANITIZE PROPERTY STRINGS "" "address,undefined" "thread")
if(PIPEWRIGHT_SANITIZE)
  if(NOT PIPEWRIGHT_SANITIZE MATCHES "^(address,undefined|address|undefined|thread)$")
    message(FATAL_ERROR "PIPEWRIGHT_SANITIZE=${PIPEWRIGHT_SANITIZE}: expected address,undefined, address, undefined "
                        "or thread (ASan and TSan cannot share a build)")
  endif()
  set(pipewright_sanitizer_flags -fsanitize=${PIPEWRIGHT_SANITIZE} -fno-omit-frame-pointer)
  if(PIPEWRIGHT_SANITIZE MATCHES "undefined")
    # Without UBSan's alignment and null checks the ASan + UBSan build compiles about a fifth faster
    # (docs/benchmarks.md), which keeps CI under its 25 minutes. x86 loads any alignment, and a null
    # dereference still faults under ASan; a null reference or `this` that is never read goes unreported.
    list(APPEND pipewright_sanitizer_flags -fno-sanitize-recover=undefined -fno-sanitize=alignment,null)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${pipewright_sanitizer_flags}>")
  # The instrumentation defeats GCC's flow analysis: -Wmaybe-uninitialized fires inside libstdc++'s <regex>
  # and on vectors returned through std::optional, where the Release build sees nothing. The Release build
  # keeps the warning, so a real read of uninitialized memory is still reported there.
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>")
  add_link_options(${pipewright_sanitizer_flags})
  message(STATUS "pipewright: sanitizers ${PIPEWRIGHT_SANITIZE}")
endif()
