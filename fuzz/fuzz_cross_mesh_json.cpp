// libFuzzer: cross-mesh plan JSON (docs/cross-mesh.md). A plan is read back (both parts checked
// as plans, the rank lists, messages, figures and hash checked), round-tripped, and run on the
// in-process backend when few ranks are used and the tensor is small. Hostile input must be refused with a dtensor::Error, never crash,
// hang or touch memory outside its buffers (ASan).
#include <cstdio>
#include <cstdlib>

#include "dtensor/cross_mesh_executor.hpp"
#include "dtensor/error.hpp"
#include "dtensor/simulate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    const dtensor::CrossMeshPlan p = dtensor::CrossMeshPlan::from_json(in);
    if (!(dtensor::CrossMeshPlan::from_json(p.to_json()) == p)) {
      std::fprintf(stderr, "FINDING: cross-mesh plan JSON round trip\n");
      std::abort();
    }
    // simulated whenever few ranks are used, whatever their ids and the world size (the world
    // simulated is the used ranks, numbered compactly)
    if (dtensor::used_world_ranks(p.src_ranks, p.dst_ranks).size() <= 16 && p.src.numel() <= 4096 && p.pre.peak_bytes <= (1 << 20) && p.post.peak_bytes <= (1 << 20) &&
        !dtensor::simulate(p).verified) {
      std::fprintf(stderr, "FINDING: a cross-mesh plan the library accepted ran to a wrong result\n");
      std::abort();
    }
  } catch (const dtensor::Error&) {
  }
  return 0;
}
