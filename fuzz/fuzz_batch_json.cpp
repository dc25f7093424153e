// libFuzzer: batch files and batch-plan JSON (docs/batch.md). A batch file is planned and, when
// small, run on the in-process backend and verified; a batch plan is read back (every plan and
// the stage structure checked), round-tripped, and run when small. Hostile input must be refused
// with a dtensor::Error, never crash, hang or touch memory outside its buffers (ASan).
#include <cstdio>
#include <cstdlib>

#include "dtensor/batch_executor.hpp"
#include "dtensor/error.hpp"
#include "dtensor/simulate.hpp"

namespace {
bool small(const dtensor::BatchPlan& b) {
  if (b.size() > 8 || b.plan(0).mesh().num_ranks() > 8 || b.staging_bytes() > (1 << 20)) return false;
  for (const auto& p : b.distinct_plans)
    if (p.src.numel() > 4096 || p.peak_bytes > (1 << 20)) return false;
  return true;
}
void run(const dtensor::BatchPlan& b) {
  if (!small(b)) return;
  if (!dtensor::simulate(b).verified) {
    std::fprintf(stderr, "FINDING: a batch plan the library accepted ran to a wrong result\n");
    std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    const auto pairs = dtensor::batch_pairs_from_json(in);
    if (pairs.size() <= 8) run(dtensor::plan_batch(pairs, dtensor::CostModel::default_model()));
  } catch (const dtensor::Error&) {
  }
  try {
    const dtensor::BatchPlan b = dtensor::BatchPlan::from_json(in);
    if (!(dtensor::BatchPlan::from_json(b.to_json()) == b)) {
      std::fprintf(stderr, "FINDING: batch plan JSON round trip\n");
      std::abort();
    }
    run(b);
  } catch (const dtensor::Error&) {
  }
  return 0;
}
