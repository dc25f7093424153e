// The Collective enum's names (nccl-tests' spellings) and the reduction rule every backend narrows.
#include "dtensor/collective.hpp"

namespace dtensor {

std::string_view to_string(Collective c) noexcept {
  switch (c) {
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_to_all: return "alltoall";
    case Collective::send_recv: return "sendrecv";
  }
  return "?";
}

std::optional<Collective> parse_collective(std::string_view t) noexcept {
  for (std::string_view suffix : {"_perf_mpi", "_perf"})
    if (t.size() > suffix.size() && t.substr(t.size() - suffix.size()) == suffix) t.remove_suffix(suffix.size());
  if (t == "all_gather" || t == "allgather") return Collective::all_gather;
  if (t == "reduce_scatter" || t == "reducescatter") return Collective::reduce_scatter;
  if (t == "all_reduce" || t == "allreduce") return Collective::all_reduce;
  if (t == "alltoall" || t == "all_to_all") return Collective::all_to_all;
  if (t == "sendrecv" || t == "send_recv") return Collective::send_recv;
  return std::nullopt;
}

bool reducible(Collective c, DType dtype, ReduceOp op) noexcept {
  return !(reduces(c) && dtype == DType::boolean && op == ReduceOp::avg);
}

}  // namespace dtensor
