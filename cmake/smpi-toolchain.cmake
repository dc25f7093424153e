# Toolchain for the SimGrid SMPI build (docs/virtual-cluster.md):
#   cmake -S . -B build-smpi -DCMAKE_TOOLCHAIN_FILE=cmake/smpi-toolchain.cmake
# Compiles everything with SimGrid's wrappers, so the MPI backend, spmd_redistribute,
# spmd_cross_mesh and the CLI's `tune measure|validate --backend mpi` run under smpirun, one
# simulated host per rank of a platform file (platforms/).
find_program(DTENSOR_SMPICXX smpicxx)
find_program(DTENSOR_SMPICC smpicc)
if(NOT DTENSOR_SMPICXX OR NOT DTENSOR_SMPICC)
  message(FATAL_ERROR "smpicxx/smpicc not found: the SMPI build needs SimGrid (Debian 12: apt-get install libsimgrid-dev)")
endif()
set(CMAKE_C_COMPILER "${DTENSOR_SMPICC}")
set(CMAKE_CXX_COMPILER "${DTENSOR_SMPICXX}")
set(MPI_CXX_COMPILER "${DTENSOR_SMPICXX}" CACHE FILEPATH "SMPI's compiler wrapper")
set(MPI_C_COMPILER "${DTENSOR_SMPICC}" CACHE FILEPATH "SMPI's compiler wrapper")
set(DTENSOR_MPI ON CACHE STRING "Build the MPI backend: AUTO, ON or OFF")
set(DTENSOR_SMPI ON CACHE BOOL "Build the MPI backend for SimGrid's SMPI")
set(DTENSOR_CUDA OFF CACHE STRING "no CUDA in the simulated build")
set(DTENSOR_BUILD_TESTS OFF CACHE BOOL "the unit tests run in the ordinary build")
set(DTENSOR_BUILD_BENCH OFF CACHE BOOL "no benchmarks in the simulated build")
set(DTENSOR_PYTHON OFF CACHE BOOL "no Python module in the simulated build")
