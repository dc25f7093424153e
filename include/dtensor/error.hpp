#pragma once
#include <stdexcept>
#include <string>

namespace dtensor {

// Every error dtensor reports about its input: one message that names the offending value.
class Error : public std::invalid_argument {
 public:
  explicit Error(const std::string& what) : std::invalid_argument(what) {}
};

}  // namespace dtensor
