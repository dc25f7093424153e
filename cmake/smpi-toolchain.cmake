# Toolchain for the SimGrid SMPI build (docs/virtual-cluster.md):
#   cmake -S . -B build-smpi -DCMAKE_TOOLCHAIN_FILE=cmake/smpi-toolchain.cmake
# The MPI backend, spmd_redistribute, spmd_cross_mesh and the CLI's `tune measure|validate
# --backend mpi` are built against SimGrid's MPI, as smpicxx builds them (SMPI's headers, its
# smpi_helpers.h included first, linked as shared objects that smpirun loads), so they run under
# smpirun, one simulated host per rank of a platform file (platforms/). The rest of the library
# calls no MPI: it is compiled by the ordinary compiler with the ordinary build's flags (CMakeLists.txt,
# "SMPI"), so a compiler cache that has seen the Release build compiles it once.
find_program(DTENSOR_SMPICXX smpicxx)
if(NOT DTENSOR_SMPICXX)
  message(FATAL_ERROR "smpicxx not found: the SMPI build needs SimGrid (Debian 12: apt-get install libsimgrid-dev)")
endif()
set(MPI_CXX_COMPILER "${DTENSOR_SMPICXX}" CACHE FILEPATH "SMPI's compiler wrapper")
set(DTENSOR_MPI ON CACHE STRING "Build the MPI backend: AUTO, ON or OFF")
set(DTENSOR_SMPI ON CACHE BOOL "Build the MPI backend for SimGrid's SMPI")
set(DTENSOR_CUDA OFF CACHE STRING "no CUDA in the simulated build")
set(DTENSOR_BUILD_TESTS OFF CACHE BOOL "the unit tests run in the ordinary build")
set(DTENSOR_BUILD_BENCH OFF CACHE BOOL "no benchmarks in the simulated build")
set(DTENSOR_PYTHON OFF CACHE BOOL "no Python module in the simulated build")
