#pragma once
// The one-process MPI stand-in (vendor_cpu.cpp): faults a test injects, and what it saw.
#include <string>

namespace dtensor::mpi_vendor::stand_in {

struct Faults {
  bool initialized = true;        // MPI_Initialized's answer
  std::string fail;               // the call that returns `code` ("iallgather", "comm_split", ...); "" none
  int code = 0;
  bool never_complete = false;    // MPI_Testall never reports completion
};
// The faults in force (reset them between tests).
Faults& faults();
// How often `call` ran since the last reset().
int calls(const std::string& call);
// Clears the faults, the counts and any pending sends/receives.
void reset();

}  // namespace dtensor::mpi_vendor::stand_in
