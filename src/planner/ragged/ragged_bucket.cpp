// FSDP buckets of ragged tensors (ragged_bucket.hpp).
#include "dtensor/ragged_bucket.hpp"

#include <nlohmann/json.hpp>

#include "dtensor/batch_plan.hpp"
#include "dtensor/error.hpp"
#include "placement/json_fields.hpp"

namespace dtensor {
namespace {

RaggedLayout element_ragged(const Mesh& mesh, int mesh_dim, const std::vector<std::int64_t>& shape, DType dtype,
                            std::vector<std::int64_t> counts) {
  const std::vector<std::vector<ShardEntry>> dims(shape.size());
  return RaggedLayout(Layout(mesh, shape, dtype, Sharding(mesh.ndim(), dims, std::vector<std::optional<ReduceOp>>(static_cast<std::size_t>(mesh.ndim())))),
                      RaggedShard{mesh_dim, static_cast<int>(shape.size()), std::move(counts)});
}

}  // namespace

std::vector<std::int64_t> RaggedBucket::local_offsets(const std::vector<RaggedLayout>& members,
                                                      std::span<const std::int64_t> coord) const {
  std::vector<std::int64_t> out;
  std::int64_t at = 0;
  for (const auto& m : members) {
    out.push_back(at);
    at += m.local_numel(coord);
  }
  return out;
}

std::optional<RaggedBucket> bucket_of(std::span<const RaggedLayout> members) {
  if (members.empty()) return std::nullopt;
  const Mesh& mesh = members[0].mesh();
  const DType dt = members[0].dtype();
  if (!members[0].ragged()) return std::nullopt;
  const int md = members[0].ragged()->mesh_dim;
  std::vector<std::int64_t> offsets;
  std::int64_t total = 0;
  for (const auto& m : members) {
    if (m.mesh() != mesh || m.dtype() != dt || !m.ragged() || m.ragged()->mesh_dim != md) return std::nullopt;
    for (const auto& p : m.base().placements())
      if (!p.is_replicate()) return std::nullopt;
    offsets.push_back(total);
    total += m.base().numel();
  }
  // per coordinate on the ragged mesh dim, the run of the concatenation its pieces cover
  const auto n = mesh.size(md);
  std::vector<std::int64_t> counts;
  std::int64_t next = 0;
  std::vector<std::int64_t> coord(static_cast<std::size_t>(mesh.ndim()), 0);
  for (std::int64_t c = 0; c < n; ++c) {
    coord[static_cast<std::size_t>(md)] = c;
    std::int64_t count = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      const auto p = members[i].piece(coord);  // the whole tensor is the block: a run of its flat ids
      if (p.size() == 0) continue;
      if (offsets[i] + p.start != next + count) return std::nullopt;  // not right after the last piece
      count += p.size();
    }
    counts.push_back(count);
    next += count;
  }
  if (next != total || total == 0) return std::nullopt;
  return RaggedBucket{element_ragged(mesh, md, {total}, dt, counts), std::move(offsets)};
}

std::vector<RaggedLayout> flat_bucket_layouts(const Mesh& mesh, int mesh_dim, std::span<const std::vector<std::int64_t>> shapes,
                                              DType dtype) {
  if (mesh_dim < 0 || mesh_dim >= mesh.ndim())
    throw InputError(fmt::format("a flat bucket over mesh dim {}: the mesh {} has {} dims", mesh_dim, mesh.str(), mesh.ndim()));
  std::int64_t total = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (shapes[i].empty()) throw InputError(fmt::format("bucket member {} is 0-d: RaggedShard needs a tensor dim", i));
    std::int64_t numel = 1;
    for (auto x : shapes[i]) {
      if (x <= 0) throw InputError(fmt::format("bucket member {} of shape {} is empty", i, shape_str(shapes[i])));
      if (x > (std::int64_t{1} << 53) / numel) throw InputError(fmt::format("bucket member {} has more than 2^53 elements", i));
      numel *= x;
    }
    if (numel > (std::int64_t{1} << 53) - total) throw InputError("a flat bucket of more than 2^53 elements");
    total += numel;
  }
  const auto n = mesh.size(mesh_dim);
  const std::int64_t chunk = (total + n - 1) / n;  // torch.chunk's piece
  std::vector<RaggedLayout> out;
  std::int64_t off = 0;
  for (const auto& shape : shapes) {
    std::int64_t numel = 1;
    for (auto x : shape) numel *= x;
    std::vector<std::int64_t> counts;
    for (std::int64_t c = 0; c < n; ++c) {
      const std::int64_t lo = std::min(total, c * chunk), hi = std::min(total, (c + 1) * chunk);
      counts.push_back(std::max<std::int64_t>(0, std::min(hi, off + numel) - std::max(lo, off)));
    }
    out.push_back(element_ragged(mesh, mesh_dim, shape, dtype, std::move(counts)));
    off += numel;
  }
  return out;
}

std::vector<std::pair<RaggedLayout, RaggedLayout>> ragged_batch_pairs_from_json(std::string_view text) {
  // the same checks as batch_pairs_from_json, each layout read as a RaggedLayout: parsed here
  // first with RaggedShard replaced, then again with it (so every error names its pair)
  const auto j = detail::parse_json(text, "batch file");
  if (!j.is_object()) throw InputError("batch file must be a JSON object");
  for (const auto& [k, v] : j.items())
    if (k != "version" && k != "mesh" && k != "mesh_names" && k != "mesh_ranks" && k != "pairs")
      throw InputError(fmt::format("batch file: unknown field {}", quote_input(k)));
  const auto v = j.find("version");
  if (v == j.end()) throw InputError("batch file lacks 'version'");
  if (detail::json_int(*v, "version", 1, 1 << 20) != 1) throw InputError("batch file: version must be 1");
  const Mesh mesh = detail::read_mesh_fields(j, "batch file");
  const auto pairs = j.find("pairs");
  if (pairs == j.end() || !pairs->is_array() || pairs->empty() || pairs->size() > kMaxBatchTensors)
    throw InputError(fmt::format("batch file: 'pairs' must be a list of 1 to {} entries", kMaxBatchTensors));
  std::vector<std::pair<RaggedLayout, RaggedLayout>> out;
  for (std::size_t i = 0; i < pairs->size(); ++i) {
    const auto& p = (*pairs)[i];
    const std::string where = fmt::format("batch file pairs[{}]", i);
    if (!p.is_object()) throw InputError(fmt::format("{} must be an object, not {}", where, detail::json_quote(p)));
    for (const auto& [k, x] : p.items())
      if (k != "shape" && k != "dtype" && k != "from" && k != "to") throw InputError(fmt::format("{}: unknown field {}", where, quote_input(k)));
    auto text_of = [&](const char* key) {
      const auto it = p.find(key);
      if (it == p.end() || !it->is_string()) throw InputError(fmt::format("{}.{} must be a string", where, key));
      return it->get<std::string>();
    };
    try {
      const auto shape = detail::read_shape_field(p, where);
      const DType dtype = p.contains("dtype") ? parse_dtype(text_of("dtype")) : DType::f32;
      out.emplace_back(RaggedLayout::parse(mesh, shape, dtype, text_of("from")), RaggedLayout::parse(mesh, shape, dtype, text_of("to")));
    } catch (const InputError& e) {
      const std::string msg = e.what();
      throw InputError(msg.starts_with(where) ? msg : fmt::format("{}: {}", where, msg));
    }
  }
  return out;
}

}  // namespace dtensor
