// libFuzzer: nccl-tests logs. Whatever parses must fit into a curve that loads back as a profile
// and predicts finite, non-negative times.
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "dtensor/error.hpp"
#include "dtensor/tune.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  dtensor::tune::LogOptions o;
  o.ranks = 8;  // so that logs without a header still reach the fit
  for (const auto& opt : {dtensor::tune::LogOptions{}, o}) {
    try {
      const auto log = dtensor::tune::parse_nccl_log(in, "fuzz_all_reduce.log", opt);
      const auto fit = dtensor::tune::fit_curve(log.rows, log.collective, false, log.ranks);
      dtensor::CostModel m;
      m.curves.push_back(fit.curve);
      if (!(dtensor::CostModel::from_json(m.to_json()) == m)) {
        std::fprintf(stderr, "FINDING: a fitted curve does not load back\n");
        std::abort();
      }
      for (double b : {0.0, 1.0, 1e3, 1e6, 1e9, 1e12}) {
        const double t = dtensor::predict_collective_us(m, log.collective, log.ranks, false, b);
        if (!std::isfinite(t) || t < 0) {
          std::fprintf(stderr, "FINDING: predicted time %g for %g bytes\n", t, b);
          std::abort();
        }
      }
    } catch (const dtensor::InputError&) {
    }
  }
  return 0;
}
