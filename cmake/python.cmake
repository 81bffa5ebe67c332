# Detects Python and nanobind for the module pipewright._core (python/CMakeLists.txt). PIPEWRIGHT_PYTHON=AUTO
# builds it when both are found, ON fails the configure step without them, OFF never looks. A sanitizer build
# leaves it out under AUTO: an instrumented module loads only into an instrumented interpreter.
# The interpreter: scikit-build-core's (pip install .), else the source tree's .venv that
# scripts/install-deps.sh makes (the one python/tests run in), else the first python3 found.
set(PIPEWRIGHT_PYTHON AUTO CACHE STRING "Build the Python module pipewright._core: AUTO (when nanobind is found), ON (required) or OFF")
set_property(CACHE PIPEWRIGHT_PYTHON PROPERTY STRINGS AUTO ON OFF)
set(PIPEWRIGHT_HAVE_PYTHON OFF)
if(PIPEWRIGHT_PYTHON STREQUAL "ON" OR (PIPEWRIGHT_PYTHON STREQUAL "AUTO" AND NOT PIPEWRIGHT_SANITIZE))
  if(NOT Python_EXECUTABLE AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/.venv/bin/python3)
    set(Python_EXECUTABLE ${CMAKE_CURRENT_SOURCE_DIR}/.venv/bin/python3)
  endif()
  find_package(Python 3.9 QUIET COMPONENTS Interpreter Development.Module)
  if(Python_FOUND)
    execute_process(COMMAND ${Python_EXECUTABLE} -m nanobind --cmake_dir
                    OUTPUT_VARIABLE nanobind_cmake_dir OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(nanobind_cmake_dir)
      list(APPEND CMAKE_PREFIX_PATH ${nanobind_cmake_dir})
      find_package(nanobind CONFIG QUIET)
    endif()
    if(nanobind_FOUND)
      set(PIPEWRIGHT_HAVE_PYTHON ON)
      # The module links the static libraries into a shared object. -fno-semantic-interposition: with -fPIC
      # alone GCC treats every exported function as replaceable at load time and stops inlining it into its
      # callers in the same file (the simulator's event loop ran 1.3x slower); nothing here is interposed.
      set(CMAKE_POSITION_INDEPENDENT_CODE ON)
      add_compile_options($<$<COMPILE_LANG_AND_ID:CXX,GNU,Clang>:-fno-semantic-interposition>)
    endif()
  endif()
  if(PIPEWRIGHT_PYTHON STREQUAL "ON" AND NOT PIPEWRIGHT_HAVE_PYTHON)
    message(FATAL_ERROR "PIPEWRIGHT_PYTHON=ON but Python's headers or nanobind were not found "
                        "(scripts/install-deps.sh installs both into .venv)")
  endif()
endif()
message(STATUS "pipewright: Python module ${PIPEWRIGHT_HAVE_PYTHON} (PIPEWRIGHT_PYTHON=${PIPEWRIGHT_PYTHON})")
