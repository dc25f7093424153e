// A checkpoint load as a file (load_request.hpp).
#include "dtensor/load_request.hpp"

#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dtensor/error.hpp"
#include "placement/json_fields.hpp"

namespace dtensor {
namespace {

constexpr std::size_t kMaxTensors = std::size_t{1} << 20, kMaxChunks = std::size_t{1} << 24;
constexpr std::int64_t kMaxIndex = std::int64_t{1} << 62;

}  // namespace

LoadRequest LoadRequest::from_json(std::string_view text) {
  const nlohmann::json j = detail::parse_json(text, "load request");
  if (!j.is_object() || !j.contains("tensors") || j.size() != 1)
    throw InputError("load request: an object with one field, 'tensors'");
  const auto& ts = j["tensors"];
  if (!ts.is_array() || ts.empty() || ts.size() > kMaxTensors)
    throw InputError(fmt::format("load request: 'tensors' must be a list of 1 to {} tensors", kMaxTensors));
  LoadRequest r;
  std::set<std::string> names;
  std::size_t chunks = 0;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const auto& t = ts[i];
    if (!t.is_object() || t.size() != 3 || !t.contains("name") || !t.contains("layout") || !t.contains("chunks"))
      throw InputError(fmt::format("load request: tensors[{}] must be an object of 'name', 'layout' and 'chunks'", i));
    if (!t["name"].is_string() || t["name"].get<std::string>().empty() || t["name"].get<std::string>().size() > 4096)
      throw InputError(fmt::format("load request: tensors[{}].name must be a non-empty string", i));
    const std::string name = t["name"].get<std::string>();
    if (!names.insert(name).second) throw InputError(fmt::format("load request: tensor {} appears twice", quote_input(name)));
    if (!t["layout"].is_object()) throw InputError(fmt::format("load request: tensor {}: 'layout' must be an object", quote_input(name)));
    if (const auto pl = t["layout"].find("placements");
        pl != t["layout"].end() && pl->is_string() && pl->get<std::string>().find("RaggedShard") != std::string::npos)
      throw InputError(fmt::format("load request: tensor {}: a RaggedShard layout ({}): load requests do not take RaggedShard "
                                   "targets yet (dtensor.torch.checkpoint.load loads them through its `ragged` argument)",
                                   quote_input(name), quote_input(pl->get<std::string>())));
    Layout layout = [&] {
      try {
        return layout_from_json(t["layout"].dump());
      } catch (const InputError& e) {
        throw InputError(fmt::format("load request: tensor {}: {}", quote_input(name), e.what()));
      }
    }();
    const auto& cs = t["chunks"];
    if (!cs.is_array() || cs.size() > kMaxChunks - chunks)
      throw InputError(fmt::format("load request: tensor {}: 'chunks' must be a list (at most {} chunks in all)", quote_input(name),
                                   kMaxChunks));
    chunks += cs.size();
    SavedTensor s{name, layout.shape(), layout.dtype(), {}};
    s.chunks.reserve(cs.size());
    for (std::size_t c = 0; c < cs.size(); ++c) {
      const std::string where = fmt::format("tensor {} chunk {}", name, c);
      if (!cs[c].is_array() || cs[c].size() != 2)
        throw InputError(fmt::format("load request: {}: a chunk is [offsets, sizes], not {}", where, detail::json_quote(cs[c])));
      SavedChunk ch{detail::json_int_list(cs[c][0], where + " offsets", 0, kMaxIndex),
                    detail::json_int_list(cs[c][1], where + " sizes", 0, kMaxIndex)};
      if (ch.offsets.size() != s.shape.size() || ch.sizes.size() != s.shape.size())
        throw InputError(fmt::format("load request: {}: {} offsets and {} sizes for a tensor of {} dims", where,
                                     ch.offsets.size(), ch.sizes.size(), s.shape.size()));
      s.chunks.push_back(std::move(ch));
    }
    r.saved.push_back(std::move(s));
    r.targets.push_back(std::move(layout));
  }
  return r;
}

std::string LoadRequest::to_json() const {
  nlohmann::ordered_json j;
  j["tensors"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < saved.size(); ++i) {
    nlohmann::ordered_json cs = nlohmann::ordered_json::array();
    for (const auto& c : saved[i].chunks) cs.push_back({c.offsets, c.sizes});
    j["tensors"].push_back({{"name", saved[i].name}, {"layout", nlohmann::ordered_json::parse(dtensor::to_json(targets[i]))},
                            {"chunks", std::move(cs)}});
  }
  return j.dump();
}

std::int32_t LoadRequest::index_of(std::string_view name) const {
  for (std::size_t i = 0; i < saved.size(); ++i)
    if (saved[i].name == name) return static_cast<std::int32_t>(i);
  std::string some;
  for (std::size_t i = 0; i < saved.size() && i < 5; ++i) some += (i ? ", " : "") + saved[i].name;
  throw InputError(fmt::format("no tensor {} in the load request (it has {}{})", quote_input(name), some,
                               saved.size() > 5 ? ", ..." : ""));
}

}  // namespace dtensor
