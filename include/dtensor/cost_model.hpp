#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace dtensor {

struct LinkParams {
  double alpha_us = 0;           // base latency of one collective
  double alpha_per_peer_us = 0;  // per ring hop / per peer of a direct exchange
  double bw_GBps = 1;            // ring bus bandwidth
  double p2p_bw_GBps = 1;        // point-to-point bandwidth (direct steps)
  friend bool operator==(const LinkParams&, const LinkParams&) = default;
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

  [[nodiscard]] static CostModel default_model();
  [[nodiscard]] static CostModel pytorch();
  // Strict: unknown fields, missing fields, non-positive bandwidths are errors.
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

}  // namespace dtensor
