#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <initializer_list>
#include <vector>

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

// User input as an error message quotes it: in double quotes, control characters and quotes
// escaped (a newline never splits the message), cut to about `max` characters with the total
// length noted.
[[nodiscard]] std::string quote_input(std::string_view text, std::size_t max = 80);

// The text of a small input file: `what` names it in errors ("log", "batch file"): it must
// exist, be a regular file of at most `max_bytes` and be readable. Throws InputError otherwise.
[[nodiscard]] std::string read_input_file(const std::string& path, std::string_view what, std::uintmax_t max_bytes);

// "0-3,6": ranks' ids sorted, runs collapsed ("-" when none), for messages.
[[nodiscard]] std::string rank_list(std::vector<std::int64_t> ranks);

// A byte count as people read it: "512 B", "1.5 KiB", "3.0 MiB", "1.25 GiB" (binary units).
[[nodiscard]] std::string bytes_text(std::int64_t bytes);

// The candidate nearest to `word` by edit distance (letters compared case-insensitively), when
// it is within `max_distance`; "" otherwise. For "did you mean" hints.
[[nodiscard]] std::string nearest_spelling(std::string_view word, std::initializer_list<std::string_view> candidates,
                                           std::size_t max_distance);
[[nodiscard]] std::string nearest_spelling(std::string_view word, const std::vector<std::string>& candidates,
                                           std::size_t max_distance);

}  // namespace dtensor
