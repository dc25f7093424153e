#pragma once
// OpenTable: the planner's one hash table. Open addressing with linear probing, at most half full,
// no node per entry: the slots are one array of small trivially copyable records. A slot type says
// when it is free (`vacant()`, true for a value-initialised slot); the caller gives each lookup its
// hash (the first slot is `hash & (slots - 1)`) and a predicate that recognises the entry, so a slot
// may hold the entry itself (the geometry's and the bounds' memos) or the index of a record kept
// elsewhere (the state ids, the bounds' held records). The table never iterates its entries, so
// nothing the planner computes depends on where an entry lands.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtensor {

template <class Slot>
class OpenTable {
 public:
  // `min_slots` (a power of two): the slot count the first insert allocates.
  explicit OpenTable(std::size_t min_slots = 16) noexcept : min_slots_(min_slots) {}

  // The slot that `match` accepts, probing from `hash`'s slot; nullptr when there is none.
  template <class Match>
  [[nodiscard]] const Slot* find(std::uint64_t hash, Match&& match) const noexcept {
    std::size_t free_at = 0;
    return find(hash, match, free_at);
  }
  // The same, and where absent `free_at` is the free slot the entry would go to (insert_at).
  template <class Match>
  [[nodiscard]] const Slot* find(std::uint64_t hash, Match&& match, std::size_t& free_at) const noexcept {
    free_at = kNoSlot;
    if (slots_.empty()) return nullptr;
    for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.vacant()) {
        free_at = i;
        return nullptr;
      }
      if (match(s)) return &s;
    }
  }
  // Adds `x` (absent, with hash `hash`) at `free_at` from find; when the table would pass half full
  // it grows first and places every entry again (`hash_of(slot)`: a placed entry's hash).
  template <class HashOf>
  void insert_at(std::size_t free_at, std::uint64_t hash, const Slot& x, HashOf&& hash_of) {
    if (2 * (used_ + 1) > slots_.size()) {
      grow(std::max(min_slots_, 2 * slots_.size()), hash_of);
      free_at = kNoSlot;
    }
    if (free_at == kNoSlot) free_at = free_slot(hash);
    slots_[free_at] = x;
    ++used_;
  }
  // insert_at without a find before it.
  template <class HashOf>
  void insert(std::uint64_t hash, const Slot& x, HashOf&& hash_of) {
    insert_at(kNoSlot, hash, x, hash_of);
  }
  // Room for `n` entries without growing.
  template <class HashOf>
  void reserve(std::size_t n, HashOf&& hash_of) {
    if (2 * n > slots_.size()) grow(std::max(min_slots_, 2 * n), hash_of);
  }
  // Empty, keeping the slots' memory.
  void clear() noexcept {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    used_ = 0;
  }
  [[nodiscard]] std::size_t size() const noexcept { return used_; }
  [[nodiscard]] std::size_t slot_count() const noexcept { return slots_.size(); }

 private:
  static constexpr std::size_t kNoSlot = ~std::size_t{0};
  [[nodiscard]] std::size_t free_slot(std::uint64_t hash) const noexcept {
    std::size_t i = hash & mask_;
    while (!slots_[i].vacant()) i = (i + 1) & mask_;
    return i;
  }
  template <class HashOf>
  void grow(std::size_t cap, HashOf&& hash_of) {
    std::size_t c = 1;
    while (c < cap) c <<= 1;
    std::vector<Slot> old(c);
    old.swap(slots_);
    mask_ = c - 1;
    for (const Slot& s : old)
      if (!s.vacant()) slots_[free_slot(hash_of(s))] = s;
  }
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t used_ = 0;
  std::size_t min_slots_;
};

}  // namespace dtensor
