// libFuzzer: plan JSON (and ragged plan JSON), then the loaded plan prepared and executed on the in-process backend
// (every rank from one thread). A hostile plan must be refused with an InputError, never crash,
// hang or touch memory outside its buffers (ASan).
#include <cstdio>
#include <cstdlib>

#include "dtensor/error.hpp"
#include "dtensor/plan.hpp"
#include "dtensor/ragged_executor.hpp"
#include "dtensor/ragged_plan.hpp"
#include "dtensor/simulate.hpp"
#include "dtensor/simulated.hpp"
#include "dtensor/verify.hpp"

namespace {

// A ragged plan (RaggedPlan's JSON): read, written back the same, and when small run on threads
// against the seeded oracle.
void ragged(std::string_view in) {
  try {
    const dtensor::RaggedPlan p = dtensor::RaggedPlan::from_json(in);
    if (!(dtensor::RaggedPlan::from_json(p.to_json()) == p)) {
      std::fprintf(stderr, "FINDING: ragged plan JSON round trip\n");
      std::abort();
    }
    const auto& mesh = p.src.mesh();
    if (mesh.num_ranks() > 8 || p.src.base().numel() > 1024) return;
    dtensor::SimulatedWorld world(mesh, dtensor::WorldOptions{std::chrono::milliseconds(20000), nullptr});
    std::vector<std::string> errors(static_cast<std::size_t>(mesh.num_ranks()));
    dtensor::run_rank_threads(world, [&](std::int64_t r, dtensor::Communicator& comm) {
      const dtensor::RaggedExecutor ex(p, comm);
      const auto input = dtensor::seeded_input(p.src, r);
      std::vector<std::byte> out(static_cast<std::size_t>(ex.output_bytes())), ws(static_cast<std::size_t>(ex.workspace_bytes()));
      ex.execute({input, out, ws});
      if (!p.dst.base().sharding().has_partial()) errors[static_cast<std::size_t>(r)] = dtensor::verify_rank_output(p.dst, r, out);
    });
    for (const auto& e : errors)
      if (!e.empty()) {
        std::fprintf(stderr, "FINDING: a ragged plan the library accepted ran to a wrong result: %s\n", e.c_str());
        std::abort();
      }
  } catch (const dtensor::Error&) {
  }
}

}  // namespace

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
  ragged(in);
  return 0;
}
