// libFuzzer: layout JSON. What reads must write and read back to the same layout.
#include <cstdio>
#include <cstdlib>

#include "dtensor/error.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/ragged.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  try {
    const dtensor::Layout l = dtensor::layout_from_json(in);
    if (!(dtensor::layout_from_json(dtensor::to_json(l)) == l)) {
      std::fprintf(stderr, "FINDING: layout JSON round trip of %s\n", l.str().c_str());
      std::abort();
    }
  } catch (const dtensor::InputError&) {
  }
  try {  // the RaggedShard form (its "ragged" record must agree with the placements)
    const dtensor::RaggedLayout l = dtensor::ragged_layout_from_json(in);
    if (!(dtensor::ragged_layout_from_json(dtensor::to_json(l)) == l)) {
      std::fprintf(stderr, "FINDING: ragged layout JSON round trip of %s\n", l.str().c_str());
      std::abort();
    }
  } catch (const dtensor::InputError&) {
  }
  return 0;
}
