#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/collective.hpp"

namespace dtensor {

// nccl-tests' bus-bytes factor: bus bytes = size * factor (ring all_gather/reduce_scatter/
// alltoall (n-1)/n, all_reduce 2(n-1)/n, sendrecv 1).
[[nodiscard]] double bus_factor(Collective c, std::int64_t n) noexcept;

// A measured curve of one collective on one link class, fitted at a group of `ranks`: time is
// α + bus bytes / bus bandwidth within each size band. Other group sizes scale the latency
// with the ring's hops and the bytes with the bus factor (docs/cost-model.md).
struct SizeBand {
  double up_to_bytes = 0;  // sizes (nccl-tests `size` column, at `ranks`) up to here; the last band: all above
  double alpha_us = 0;
  double bw_GBps = 1;      // bus bandwidth
  friend bool operator==(const SizeBand&, const SizeBand&) = default;
};
struct CollectiveCurve {
  Collective collective = Collective::all_reduce;
  bool inter_host = false;
  std::int64_t ranks = 2;
  std::vector<SizeBand> bands;
  // Time (µs) for a group of n ranks moving `bytes` (that collective's nccl-tests size), from
  // the band holding the equivalent size at the fitted group size; monotone in bytes.
  // `alpha_us` receives the latency part when given.
  [[nodiscard]] double time_us(std::int64_t n, double bytes, double* alpha_us = nullptr) const;
  friend bool operator==(const CollectiveCurve&, const CollectiveCurve&) = default;
};

struct LinkParams {
  double alpha_us = 0;           // base latency of one collective
  double alpha_per_peer_us = 0;  // per ring hop / per peer of a direct exchange
  double bw_GBps = 1;            // ring bus bandwidth
  double p2p_bw_GBps = 1;        // point-to-point bandwidth (direct steps)
  friend bool operator==(const LinkParams&, const LinkParams&) = default;
};

// One step as the cost model sees it: what moves, over how many ranks, on which link. The
// planner describes every step so; CostModel::time is the one place that turns it into time.
struct Traffic {
  enum class Kind : std::uint8_t { collective, direct, local, free } kind = Kind::collective;
  Collective collective = Collective::all_reduce;  // kind collective
  std::int64_t group = 1;      // ranks in the collective
  std::int64_t peers = 0;      // direct: the busiest rank's peers
  bool inter_host = false;
  double bytes = 0;            // collective: nccl-tests size; direct: the busiest rank's bytes
  double shard_bytes = 0;      // PyTorch's count: the tensor's bytes over the source's shard count
  double copy_bytes = 0;       // local copies (packing, padding, unpacking)
};
struct StepTime {
  double alpha_us = 0, wire_us = 0, copy_us = 0;
  [[nodiscard]] double total_us() const noexcept { return alpha_us + wire_us + copy_us; }
};

// Storage a checkpoint load reads from (load_plan.hpp, docs/checkpoint.md), per reading rank:
// `read_bw_GBps`, plus `read_alpha_us` per chunk opened. A fixed field of the profile (defaults: a
// local NVMe drive shared by a node's ranks), measured only on request (`dtensor tune storage`),
// so load plans do not vary between runs.
struct StorageParams {
  double read_bw_GBps = 2.0;
  double read_alpha_us = 100.0;
  friend bool operator==(const StorageParams&, const StorageParams&) = default;
};

// The cost model (docs/cost-model.md): time_us = α + bytes/β with ring wire bytes, plus local copies.
// `formula` "pytorch" switches to PyTorch's _collective_utils conventions (GiB units, bytes
// from the source's plain-Shard count, +1 µs on all_to_all, free local steps).
struct CostModel {
  enum class Formula { ring, pytorch };
  std::string name = "default";
  Formula formula = Formula::ring;
  std::int64_t devices_per_host = 8;
  LinkParams intra{6.6, 0.6, 360, 380};
  LinkParams inter{6.6, 2.7, 46, 46};
  double copy_bw_GBps = 1500;
  // Fitted curves (profile version 2; ring formula only): where one exists for a step's
  // collective and link class, it replaces the α-β line of `intra`/`inter`.
  std::vector<CollectiveCurve> curves;
  // What checkpoint loads price reads with (profile field `storage`, optional).
  StorageParams storage;

  // The time of one step (the planner's steps, `tune predict` and the virtual clock all ask here).
  [[nodiscard]] StepTime time(const Traffic& t) const;
  [[nodiscard]] const CollectiveCurve* curve(Collective c, bool inter_host) const noexcept;
  // The most optimistic link constants any step on that link class can see (curves included):
  // what the planner's lower bounds use. Equal to link() when there are no curves.
  [[nodiscard]] LinkParams bound_link(bool inter_host) const noexcept;
  // What the planner's lower bounds may assume of this model (docs/planner.md, "Bounds"). True
  // when a step's time depends only on its kind, its mesh dims and how many mesh dims shard the
  // source (PyTorch's formula: bytes from the tensor's size over the shard count), not on which
  // elements move: then per-mesh-dim placement classes price every step exactly, a size-1 tensor
  // dim can still change a step's time, and moving missing elements adds no byte-proportional
  // time beyond that.
  [[nodiscard]] bool prices_by_shard_count() const noexcept { return formula == Formula::pytorch; }
  // Whether plans under this profile default to PyTorch's own transitions (the `pytorch` edge
  // set) rather than every edge: true for the profile that reproduces torch's planner.
  [[nodiscard]] bool defaults_to_pytorch_edges() const noexcept { return formula == Formula::pytorch; }
  // The fastest rate (GB/s) at which any step on that link class delivers the bytes a rank
  // receives, from bound_link: a collective's bus bandwidth, or a direct step's point-to-point
  // bandwidth with the copy it makes of every element it receives (ring formulas charge it).
  [[nodiscard]] double receive_bw_floor_GBps(bool inter_host) const noexcept;
  // A lower bound on the time of the steps that deliver `bytes` to one rank: at the fastest
  // receive rate of either link (`direct_only`: a direct step's wire time alone, at the fastest
  // point-to-point bandwidth), 0 when prices_by_shard_count().
  [[nodiscard]] double wire_floor_us(double bytes, bool direct_only = false) const noexcept;
  // The time of a direct step of `bytes` to `peers` peers (at least one), without copies, on the
  // inter-host link when `inter_host` is certain, else on whichever link prices it lower: what
  // any transfer whose busiest rank moves those bytes to that many peers costs at least.
  [[nodiscard]] double direct_floor_us(double bytes, std::int64_t peers, bool inter_host) const;
  // wire_floor_us's rate (bytes per µs, either link), for callers that price many byte counts.
  [[nodiscard]] double receive_floor_bytes_per_us() const noexcept;

  [[nodiscard]] static CostModel default_model();
  [[nodiscard]] static CostModel pytorch();
  // Strict: unknown fields, missing fields, non-positive bandwidths are errors. Reads profile
  // versions 1 (links only) and 2 (links and fitted curves).
  [[nodiscard]] static CostModel from_json(std::string_view json);
  // "default", "pytorch", or a path to a JSON profile.
  [[nodiscard]] static CostModel load(std::string_view name_or_path);
  [[nodiscard]] std::string to_json() const;
  // A mesh dim is inter-host when its size times the sizes of the dims to its right exceeds
  // devices_per_host.
  [[nodiscard]] bool is_inter_host(std::span<const std::int64_t> mesh_shape, int mesh_dim) const noexcept;
  [[nodiscard]] const LinkParams& link(bool inter_host) const noexcept { return inter_host ? inter : intra; }
  // Stable identity of every constant (used as the plan-cache key).
  [[nodiscard]] std::uint64_t fingerprint() const noexcept;
  friend bool operator==(const CostModel&, const CostModel&) = default;
};

// The time the planner charges one collective over a group of n ranks on the intra- or
// inter-node link, without local copies: `bytes` as nccl-tests' `size` column counts them for
// that collective (all_gather: the gathered buffer; reduce_scatter: the input; all_reduce: the
// buffer; alltoall: the send buffer; sendrecv: what one rank sends its peer). A fitted curve
// where the profile has one, else the link's α-β line (or PyTorch's formula).
[[nodiscard]] double predict_collective_us(const CostModel& model, Collective c, std::int64_t n, bool inter_host,
                                           double bytes, double* alpha_us = nullptr, double* wire_us = nullptr);

}  // namespace dtensor
