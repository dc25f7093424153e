// libFuzzer: plan JSON, then the loaded plan prepared and executed on the in-process backend
// (every rank from one thread). A hostile plan must be refused with an InputError, never crash,
// hang or touch memory outside its buffers (ASan).
#include <cstdio>
#include <cstdlib>

#include "dtensor/error.hpp"
#include "dtensor/plan.hpp"
#include "dtensor/simulate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    const dtensor::Plan p = dtensor::Plan::from_json(in);
    if (!(dtensor::Plan::from_json(p.to_json()) == p)) {
      std::fprintf(stderr, "FINDING: plan JSON round trip\n");
      std::abort();
    }
    // small enough to run: execute it (the executor checks every buffer region first); an
    // accepted plan must give the right result (its peak_bytes is what its steps need, so the
    // tensor's size bounds the workspace too)
    if (p.mesh().num_ranks() <= 16 && p.src.numel() <= 4096 && !dtensor::simulate(p).verified) {
      std::fprintf(stderr, "FINDING: a plan the library accepted ran to a wrong result\n");
      std::abort();
    }
  } catch (const dtensor::Error&) {
  }
  return 0;
}
