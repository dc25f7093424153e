#pragma once
// Loading a checkpoint into a layout (docs/checkpoint.md): the source is storage, described as
// DCP's metadata describes it -- per tensor, the saved chunks (offsets and sizes) -- and the
// target is a layout on the loading job's mesh. The plan reads every saved byte exactly once
// (each chunk by one reader, preferring a rank that needs its bytes, balanced by the predicted
// time), then moves every piece a target rank needs from its reader -- to the rank itself, or,
// where the cost model prices it lower, to an intermediate layout that shards the target's
// replicated mesh dims, which a batch of collectives inside the mesh then gathers (the fan-out).
// Planning is O(C log C + C * n) for C saved chunks and n needers per chunk, the range queries once
// per distinct kind of tensor (target blocks and chunks), once per fan-out candidate planned (at
// most 8, most ruled out by a floor). A rank can plan its own part alone (plan_load_part).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dtensor/batch_plan.hpp"
#include "dtensor/cost_model.hpp"
#include "dtensor/layout.hpp"
#include "dtensor/ragged.hpp"

namespace dtensor {

// One saved chunk (DCP's ChunkStorageMetadata): its first index and extent per tensor dim.
struct SavedChunk {
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> sizes;
  friend bool operator==(const SavedChunk&, const SavedChunk&) = default;
};
// One saved tensor (DCP's TensorStorageMetadata): its global shape, dtype and chunks, which must
// tile the tensor exactly (no gap, no overlap).
struct SavedTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  DType dtype = DType::f32;
  std::vector<SavedChunk> chunks;
};

// How replicas get their copies. `cheapest`: the predicted-fastest of `direct` and every `gather`
// candidate (per set of replicated mesh dims sharded). `direct`: every rank receives its elements
// from the chunk's reader (point to point). `gather`: every replicated mesh dim received sharded
// and gathered inside the mesh (direct when no target has replicas).
enum class Fanout : std::uint8_t { cheapest, direct, gather };
[[nodiscard]] const char* to_string(Fanout f) noexcept;
// "cheapest", "direct" or "gather"; InputError naming the text otherwise.
[[nodiscard]] Fanout parse_fanout(std::string_view text);

// Overrides of the cost profile's storage field (CostModel::storage: its defaults, or what
// `dtensor tune storage` measured), and the fan-out, for one plan.
struct LoadOptions {
  std::optional<double> read_bw_GBps;
  std::optional<double> read_alpha_us;
  Fanout fanout = Fanout::cheapest;
  friend bool operator==(const LoadOptions&, const LoadOptions&) = default;
};

struct LoadPart;

struct LoadPlan {
  struct Read {
    std::int32_t tensor = 0;  // index into the saved tensors
    std::int32_t chunk = 0;   // index into its chunks
    std::int64_t reader = 0;  // target mesh rank
    std::int64_t bytes = 0;
    friend bool operator==(const Read&, const Read&) = default;
  };
  // The elements of the chunk's box that rank `to` owns in the tensor's received layout (its
  // target, or its intermediate when it is staged), from the chunk's reader (`from == to`: a
  // local copy). Boxes and their order are the overlap's (row-major).
  struct Message {
    std::int32_t tensor = 0;
    std::int32_t chunk = 0;
    std::int64_t from = 0;
    std::int64_t to = 0;
    std::int64_t elements = 0;
    friend bool operator==(const Message&, const Message&) = default;
  };
  Mesh mesh{std::vector<std::int64_t>{1}};
  std::vector<Read> reads;        // one per saved chunk with bytes, in (tensor, chunk) order
  std::vector<Message> messages;  // in (tensor, chunk, to) order
  // The fan-out inside the mesh: the tensors received in an intermediate layout (ascending), and
  // the batch that takes each to its target (post.plan(i): staged[i]'s intermediate -> target).
  // Empty when every tensor is received as its target.
  std::vector<std::int32_t> staged;
  BatchPlan post;
  std::int64_t total_read_bytes = 0;     // every saved byte once
  std::int64_t busiest_read_bytes = 0;   // the most any rank reads
  std::int64_t balanced_read_bytes = 0;  // the least any assignment of whole chunks reaches at best
  std::int64_t moved_bytes = 0;          // bytes sent between two ranks (the messages)
  std::int64_t gathered_bytes = 0;       // what the post batch brings the ranks: per staged tensor, the
                                         // bytes of its target's local shards beyond its intermediate's, summed over ranks
  std::int64_t busiest_transfer_bytes = 0;  // max over ranks of max(sent, received)
  std::int64_t busiest_peers = 0;          // max over ranks of its distinct peers, either way
  bool inter_host = false;
  double read_us = 0, transfer_us = 0, post_us = 0, total_us = 0;  // total: the three in turn
  std::string cost_model;
  StorageParams storage;  // what the reads were priced with

  [[nodiscard]] std::uint64_t hash() const;
  // The hash of the plan's decisions: its mesh, who reads each chunk, the staged tensors and the
  // post batch (the messages follow from these and the load). What a rank's part carries, so that
  // ranks that planned their parts alone can check they made the same plan.
  [[nodiscard]] std::uint64_t decision_hash() const;
  // Rank `rank`'s part of this plan (plan_load_part's, from a whole plan). InputError off the mesh.
  [[nodiscard]] LoadPart part(std::int64_t rank) const;
  [[nodiscard]] std::string to_json(int indent = -1) const;
  // The layout tensor `t` is received in: its intermediate when staged, else `target`.
  [[nodiscard]] const Layout& received_layout(std::int32_t t, const Layout& target) const;
  // A plan's JSON (to_json's), validated as untrusted: every field present and of its type, ranks
  // on the mesh, counts non-negative, reads and messages in their orders, the post batch as
  // BatchPlan::from_json reads it (on the plan's mesh, one plan per staged tensor), and the hash
  // the one the entries give. Sizes follow the entries (at most 2^24 of each). Throws InputError naming
  // the field. Whether it fits a load is check_load_plan's question.
  [[nodiscard]] static LoadPlan from_json(std::string_view json);
  friend bool operator==(const LoadPlan&, const LoadPlan&) = default;
};

// Checks a saved tensor against the layout it loads into: the shape and dtype agree, and the
// chunks tile the tensor exactly (every chunk has one offset and size per dim, non-negative, within
// the tensor, without overflow; no two overlap; together they cover it). Throws InputError naming
// the tensor and the chunk.
void check_saved(const SavedTensor& saved, const Layout& target);

// The load plan of `saved[i]` into `targets[i]` (one mesh, no Partial). Deterministic: the same
// inputs give the same plan on every rank. Throws InputError (check_saved's, lists of different
// lengths, targets on different meshes, a Partial target, more than 2^31 tensors or chunks).
[[nodiscard]] LoadPlan plan_load(std::span<const SavedTensor> saved, std::span<const Layout> targets, const CostModel& cost,
                                 const LoadOptions& options = {});

// One rank's part of a load plan: `plan` holds only the reads of rank `rank` and the messages it
// sends or receives (in the whole plan's orders), and every other field of the whole plan (its
// figures, fan-out and post batch: the same on every rank); `decision_hash` is the whole plan's
// decision_hash().
struct LoadPart {
  std::int64_t rank = 0;
  std::uint64_t decision_hash = 0;
  LoadPlan plan;
  // {"kind": "load_part", "rank", "decision_hash", "plan": the partial plan's to_json}
  [[nodiscard]] std::string to_json(int indent = -1) const;
  friend bool operator==(const LoadPart&, const LoadPart&) = default;
};

// Rank `rank`'s part of plan_load(saved, targets, cost, options), planned by that rank alone:
// the same decision (who reads what, the fan-out) as the whole plan, then only this rank's
// entries; equal to plan_load(...).part(rank). Its time is the decision's (linear in the chunks
// and their needers, a model's repeated tensors met once) plus the rank's entries, never the
// whole plan's messages. InputError as plan_load, or naming a rank off the mesh.
[[nodiscard]] LoadPart plan_load_part(std::span<const SavedTensor> saved, std::span<const Layout> targets, std::int64_t rank,
                                      const CostModel& cost, const LoadOptions& options = {});

// Whether `plan` loads `saved` into `targets` (a plan from elsewhere: from_json, another rank):
// every non-empty chunk read by exactly one rank with its bytes, and its messages exactly the
// ranks holding some of it in the received layout, each with the element count it holds, sent by
// its reader; every staged tensor's post plan from an intermediate without Partial (same mesh,
// shape and dtype) to its target; and its derived figures what its entries give (the bytes
// balanced, moved, gathered, the busiest transfer and peers, post_us; with `cost`, also the cost
// model's name, inter_host, read_us at the plan's storage parameters and transfer_us). Throws
// InputError naming the tensor and chunk, or the field, that differ.
void check_load_plan(const LoadPlan& plan, std::span<const SavedTensor> saved, std::span<const Layout> targets,
                     const CostModel* cost = nullptr);
// check_load_plan's two halves: the entries (reads, messages, post plans: a plan of another load
// fails here) and, for a plan whose entries passed, the derived figures (a figure that differs
// is an edited file: the CLI exits 2).
void check_load_entries(const LoadPlan& plan, std::span<const SavedTensor> saved, std::span<const Layout> targets);
void check_load_figures(const LoadPlan& plan, std::span<const SavedTensor> saved, std::span<const Layout> targets,
                        const CostModel* cost = nullptr);

// The plain layout a RaggedShard target is loaded in (docs/checkpoint.md, "Ragged targets"): its
// base with the ragged mesh dim received as Replicate or as a Shard of one of the RaggedShard's
// dims (appended: the ragged cut is the innermost split), whichever makes the busiest rank's
// receipt at the point-to-point bandwidth plus the ragged plan to the target (plan_ragged) cost
// least under `cost` (ties: Replicate, then the lower dim). A target without a RaggedShard is its
// own base. The load plans the intermediate; plan_ragged then takes it to the target.
[[nodiscard]] Layout ragged_intermediate(const RaggedLayout& target, const CostModel& cost);

// Who reads what (bytes read per rank against the balanced bound) and what moves after.
[[nodiscard]] std::string explain(const LoadPlan& plan);
// What one rank reads, sends and receives, beside the whole plan's figures.
[[nodiscard]] std::string explain(const LoadPart& part);

// One tensor's part of a plan: each chunk (offsets, sizes), its reader, and the ranks it goes to
// with their element counts. `tensor` indexes `saved`, as the plan's entries do.
[[nodiscard]] std::string show_tensor(const LoadPlan& plan, std::span<const SavedTensor> saved, std::int32_t tensor);

}  // namespace dtensor
