#pragma once
// Who owns what, as a grid over one or two tensor dims: for pictures and tables of a layout
// (the CLI's grids and `dtensor show` draw from it). Computed from the run lists, never by
// listing elements.
#include <cstdint>
#include <vector>

#include "dtensor/layout.hpp"

namespace dtensor {

// The chosen dims are cut at every boundary of any rank's index runs; each cell of the grid lists
// the global ranks that hold it (ascending). A rank that holds nothing at all (an empty shard on a
// dim not drawn) owns no cell.
struct OwnershipMap {
  int dim_row = 0;
  int dim_col = -1;                               // -1: a single column (1-d view)
  std::vector<std::int64_t> row_cuts, col_cuts;   // from 0 to the dim's size
  std::vector<std::vector<std::int64_t>> owners;  // row-major cells: (row_cuts.size()-1) x (col_cuts.size()-1)
  [[nodiscard]] std::size_t rows() const noexcept { return row_cuts.empty() ? 0 : row_cuts.size() - 1; }
  [[nodiscard]] std::size_t cols() const noexcept { return col_cuts.empty() ? 0 : col_cuts.size() - 1; }
  [[nodiscard]] const std::vector<std::int64_t>& at(std::size_t i, std::size_t j) const { return owners[i * cols() + j]; }
};

// Throws InputError for a dim out of range, or when a dim would have more than
// `max_cells_per_dim` cells (naming the counts).
[[nodiscard]] OwnershipMap ownership_map(const Layout& layout, int dim_row, int dim_col = -1,
                                         std::size_t max_cells_per_dim = 256);

}  // namespace dtensor
