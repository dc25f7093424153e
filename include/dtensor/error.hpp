#pragma once
#include <stdexcept>
#include <string>

namespace dtensor {

// The root of every error dtensor reports: one message that names the offending value.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A bad request: a malformed layout, plan, profile or buffer, an impossible constraint. The
// CLI maps it to exit status 2; Python to ValueError.
class InputError : public Error {
 public:
  explicit InputError(const std::string& what) : Error(what) {}
};

// The backend failed while the request itself was fine: a CUDA/NCCL/MPI error, ranks whose plans
// differ, a collective that did not complete in time. The CLI maps it to exit status 4.
class BackendError : public Error {
 public:
  explicit BackendError(const std::string& what) : Error(what) {}
};

}  // namespace dtensor
