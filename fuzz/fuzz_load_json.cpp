// libFuzzer: load requests and load-plan JSON (docs/checkpoint.md). A request that parses is, when
// small, planned (with the cost model's fan-out and with the gather); each plan must round-trip
// through JSON and pass check_load_plan against the request, and the request must round-trip too. Plan JSON that parses must round-trip. Hostile
// input must be refused with a dtensor::Error, never crash, hang or read outside its buffers.
#include <cstdio>
#include <cstdlib>

#include "dtensor/error.hpp"
#include "dtensor/load_request.hpp"

namespace {
[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "FINDING: %s\n", what);
  std::abort();
}
bool small(const dtensor::LoadRequest& r) {
  if (r.saved.size() > 8) return false;
  std::size_t chunks = 0;
  for (std::size_t i = 0; i < r.saved.size(); ++i) {
    if (r.targets[i].numel() > 4096 || r.targets[i].mesh().num_ranks() > 16) return false;
    chunks += r.saved[i].chunks.size();
  }
  return chunks <= 256;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    const auto req = dtensor::LoadRequest::from_json(in);
    const auto again = dtensor::LoadRequest::from_json(req.to_json());
    if (again.to_json() != req.to_json()) finding("load request JSON round trip");
    if (small(req)) {
      try {
        for (const auto fanout : {dtensor::Fanout::cheapest, dtensor::Fanout::gather}) {
          dtensor::LoadOptions o;
          o.fanout = fanout;
          const auto plan = dtensor::plan_load(req.saved, req.targets, dtensor::CostModel::default_model(), o);
          const auto back = dtensor::LoadPlan::from_json(plan.to_json());
          if (!(back == plan)) finding("load plan JSON round trip");
          dtensor::check_load_plan(back, req.saved, req.targets);  // must not throw: the planner's own plan
          for (std::size_t t = 0; t < req.saved.size(); ++t) (void)dtensor::show_tensor(plan, req.saved, static_cast<std::int32_t>(t));
        }
      } catch (const dtensor::InputError& e) {
        // bad chunks (check_saved) are refused; a plan that fails its own check is a finding
        if (std::string_view(e.what()).starts_with("load plan:")) finding("the planner's plan fails check_load_plan");
      }
    }
  } catch (const dtensor::Error&) {
  }
  try {
    const auto p = dtensor::LoadPlan::from_json(in);
    if (!(dtensor::LoadPlan::from_json(p.to_json()) == p)) finding("parsed load plan JSON round trip");
  } catch (const dtensor::Error&) {
  }
  return 0;
}
