#pragma once
// Fitting the cost model to measurements (docs/cost-model.md, "Tuning"): nccl-tests logs in,
// per-collective size-band curves out (`dtensor tune fit`), and predictions from a profile
// (`dtensor tune predict`).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <functional>

#include "dtensor/comm.hpp"
#include "dtensor/cost_model.hpp"
#include "dtensor/layout.hpp"

namespace dtensor::tune {

// One measured row: the nccl-tests `size` column (bytes, in that collective's own sense) and
// the out-of-place time.
struct Row {
  std::int64_t bytes = 0;
  double time_us = 0;
  int line = 0;  // 1-based line in the log
};
struct IgnoredRow {
  int line = 0;
  std::string reason;
};

struct Log {
  std::string name;
  Collective collective = Collective::all_reduce;
  std::int64_t ranks = 0;
  std::int64_t ranks_per_node = 0;
  bool has_run_header = false;  // "# nThread ..." / "# Using devices" present
  std::vector<Row> rows;
  std::vector<IgnoredRow> ignored;
};

struct LogOptions {
  std::optional<Collective> collective;  // when the log does not say
  std::optional<std::int64_t> ranks;     // required when the log has no run header
  std::optional<std::int64_t> ranks_per_node;
};

// Reads nccl-tests output (all_gather_perf, reduce_scatter_perf, all_reduce_perf, alltoall_perf,
// sendrecv_perf), with Open MPI `[1,0]<stdout>:` tags (also inside rows), Slurm `0: ` labels,
// indentation, missing run headers, zero-byte rows, `N/A` columns and repeated sizes.
// Throws InputError naming the log and the line for what it cannot read.
[[nodiscard]] Log parse_nccl_log(std::string_view text, std::string_view name, const LogOptions& options = {});

// Reads the nccl-tests log file at `path` (at most 64 MiB; bytes that are not UTF-8 are kept as
// they are) and parses it, named by its path. InputError naming the file when it does not exist,
// is not a regular file, is too large or cannot be read.
[[nodiscard]] Log read_nccl_log(const std::string& path, const LogOptions& options = {});

// Fits a curve to rows of one collective: up to `max_bands` size bands (contiguous in size),
// each α + bytes/β by least squares on relative error, robust to outliers (rows off by more
// than 3x the median error and 25% are dropped once and reported), made monotone.
struct Fit {
  CollectiveCurve curve;
  std::vector<IgnoredRow> outliers;
  std::size_t rows_used = 0;
  double median_rel_error = 0;  // on the rows used
  double max_rel_error = 0;
};
[[nodiscard]] Fit fit_curve(std::span<const Row> rows, Collective collective, bool inter_host, std::int64_t ranks,
                            int max_bands = 4);

// Fits every log (one per collective and link class) into a profile: `base`'s links and copy
// bandwidth plus one curve per log; when there are inter-node logs, `devices_per_host` is the
// most ranks any log puts on one host (the inter-node logs' ranks per node, an intra-node log's
// ranks: `tune measure` measures the inter link over one rank per host of one mesh dim).
// Throws InputError for two logs of the same collective and link, inter-node logs that disagree
// on ranks per node, or a pytorch-formula base. The result is checked by loading it back.
struct LogFit {
  Log log;
  Fit fit;
  bool inter_host = false;
  std::vector<IgnoredRow> ignored;  // the parser's and the fit's, by line
};
struct ProfileFit {
  CostModel model;
  std::vector<LogFit> logs;
  // Per link (0 intra, 1 inter), the per-peer latency of a direct exchange when the logs measure
  // both alltoall (n ranks: n-1 peers at once) and sendrecv (one peer) on it: (alltoall's latency
  // - sendrecv's) / (n - 2), at least 0, written into the profile's link; unset otherwise (the
  // base profile's kept). A direct step's time is sendrecv's curve plus this per peer beyond one.
  std::optional<double> per_peer_us[2];
};
[[nodiscard]] ProfileFit fit_profile(std::span<const Log> logs, const CostModel& base);

// What `tune fit` prints (the CLI and `python -m dtensor.tune fit`): per log the rows used, the
// median and largest error, the bands and the ignored rows, as text or as JSON ({"profile",
// "logs": [...]}: docs/cli.md); one curve's band table; and the warnings: a fit whose median error
// exceeds kFitWarnError, or a band at a limit of the profile's validation (`--strict` refuses them).
inline constexpr double kFitWarnError = 0.20;
[[nodiscard]] std::string fit_text(const ProfileFit& fitted);
[[nodiscard]] std::string fit_json(const ProfileFit& fitted, const std::string& profile_path);
[[nodiscard]] std::string curve_table(const CollectiveCurve& curve);
[[nodiscard]] std::vector<std::string> fit_warnings(const ProfileFit& fitted);

// The single α-β line through the same rows (the baseline the size bands are measured against).
[[nodiscard]] CollectiveCurve fit_line(std::span<const Row> rows, Collective collective, bool inter_host,
                                       std::int64_t ranks);

// Microbenchmarks through the library's own communicators, written as nccl-tests logs.
struct MeasureOptions {
  std::int64_t min_bytes = 1024;            // nccl-tests sizes, doubling from min to max
  std::int64_t max_bytes = 16 << 20;
  int warmup = 1;
  int iters = 5;
  std::int64_t devices_per_host = 8;        // which mesh dims are intra-node (as a profile says)
};
struct MeasuredLog {
  std::string name;  // "all_gather-intra.txt"
  std::string text;  // nccl-tests format
};
// SPMD: every rank of the communicator's mesh calls it; buffers in comm.memory() (host, or the
// GPU's for NCCL); `now_us` reads this rank's clock (wall or virtual). Times all_gather, reduce_scatter, all_reduce, alltoall and sendrecv (to the next
// member, from the previous) on the group of the mesh dims within a host and on the largest
// mesh dim across hosts (the last of equals), f32, out of place. Rank 0 gets one log per (collective, link); the other
// ranks an empty list.
[[nodiscard]] std::vector<MeasuredLog> measure(Communicator& comm, const MeasureOptions& options,
                                               const std::function<double()>& now_us);

// `measure` on every rank of an in-process mesh whose virtual clock charges what `truth` prices
// (times 1 + noise * u, u seeded by `seed`): rank 0's logs, which `fit` reads. The measure-fit
// loop without hardware (tests, benchmarks); throws if a rank other than 0 returns logs.
[[nodiscard]] std::vector<MeasuredLog> measure_on_virtual_clock(const Mesh& mesh, const CostModel& truth, double noise,
                                                                const MeasureOptions& options, std::uint64_t seed = 1);

// `tune validate` (the plan chosen against its competitors): dtensor/tune_validate.hpp.

}  // namespace dtensor::tune
