#pragma once
#include <functional>
#include <string>

#include "dtensor/error.hpp"

// The message of the dtensor::Error `f` throws, or "<no error>".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dtensor::Error& e) {
    return e.what();
  }
  return "<no error>";
}
