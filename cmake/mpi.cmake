# Detects MPI (OpenMPI from Debian: libopenmpi-dev, openmpi-bin) for ranks as processes under mpirun.
# PIPEWRIGHT_MPI=AUTO builds the MPI parts when found, ON fails the configure step without it, OFF never looks.
set(PIPEWRIGHT_MPI AUTO CACHE STRING "Build the MPI parts (ranks as processes): AUTO (when found), ON (required) or OFF")
set_property(CACHE PIPEWRIGHT_MPI PROPERTY STRINGS AUTO ON OFF)
set(PIPEWRIGHT_HAVE_MPI OFF)
if(NOT PIPEWRIGHT_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(PIPEWRIGHT_HAVE_MPI ON)
    # The tests start jobs with the launcher that belongs to the library found.
    if(NOT MPIEXEC_EXECUTABLE)
      find_program(MPIEXEC_EXECUTABLE NAMES mpirun mpiexec)
    endif()
  endif()
  if(PIPEWRIGHT_MPI STREQUAL "ON" AND NOT PIPEWRIGHT_HAVE_MPI)
    message(FATAL_ERROR "PIPEWRIGHT_MPI=ON but MPI was not found (install libopenmpi-dev and openmpi-bin)")
  endif()
endif()
message(STATUS "pipewright: MPI parts ${PIPEWRIGHT_HAVE_MPI} (PIPEWRIGHT_MPI=${PIPEWRIGHT_MPI})")
