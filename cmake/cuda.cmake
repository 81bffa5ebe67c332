# Detects CUDA and NCCL. PIPEWRIGHT_CUDA=AUTO builds the CUDA parts when both are found,
# ON fails the configure step without them, OFF never looks.
set(PIPEWRIGHT_HAVE_CUDA OFF)
if(NOT PIPEWRIGHT_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # CUDA 13 has no targets below sm_75; the tool targets A100 (80) and H100/H200 (90).
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
    # NCCL has no CMake target: it is looked for under NCCL_ROOT (a folder with include/ and lib/, such as
    # the nvidia-nccl wheel's nvidia/nccl, whose library is only libnccl.so.2), then in the toolkit.
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
      HINTS ${NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
    if(CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      enable_language(CUDA)
      set(PIPEWRIGHT_HAVE_CUDA ON)
      add_library(pipewright_nccl INTERFACE)
      target_include_directories(pipewright_nccl INTERFACE ${NCCL_INCLUDE_DIR})
      target_link_libraries(pipewright_nccl INTERFACE ${NCCL_LIBRARY})
    endif()
  endif()
  if(PIPEWRIGHT_CUDA STREQUAL "ON" AND NOT PIPEWRIGHT_HAVE_CUDA)
    message(FATAL_ERROR "PIPEWRIGHT_CUDA=ON but CUDA or NCCL was not found (nvcc, nccl.h, libnccl.so)")
  endif()
endif()
message(STATUS "pipewright: CUDA parts ${PIPEWRIGHT_HAVE_CUDA} (PIPEWRIGHT_CUDA=${PIPEWRIGHT_CUDA})")
