// The MPI backend: one rank of a mesh per MPI process, every MPI call through the vendor table
// (vendor.hpp), so its logic also runs on the one-process stand-in in tests.
#include "dtensor/mpi.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <mutex>
#include <thread>

#include "dtensor/error.hpp"
#include "dtensor/scalar.hpp"
#include "post_order.hpp"
#include "vendor.hpp"

namespace dtensor {
namespace {

const mpi_vendor::Table& V() { return mpi_vendor::table(); }


void check(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  V().error_string(rc, msg, &len);
  throw BackendError(fmt::format("{}: MPI error {} ({})", what, rc, std::string(msg, static_cast<std::size_t>(len))));
}

int as_int(std::int64_t count, const char* what) {
  if (count < 0 || count > INT_MAX)
    throw InputError(fmt::format("{} of {} elements exceeds what one MPI call carries ({})", what, count, INT_MAX));
  return static_cast<int>(count);
}

// One contiguous MPI datatype per dtype (its bytes), and user-defined reductions over them that
// run dtensor's own arithmetic: MPI has no bf16, f16 or fp8.
struct Types {
  MPI_Datatype raw[16] = {};
  MPI_Op user_op[5] = {};
};
Types& types() {
  static Types t;
  static std::once_flag once;
  std::call_once(once, [] {
    for (DType d : kAllDTypes) {
      MPI_Datatype x;
      V().type_contiguous(static_cast<int>(itemsize(d)), MPI_BYTE, &x);
      V().type_commit(&x);
      t.raw[static_cast<int>(d)] = x;
    }
  });
  return t;
}
DType dtype_of(MPI_Datatype x) {
  for (DType d : kAllDTypes)
    if (types().raw[static_cast<int>(d)] == x) return d;
  return DType::u8;  // not reached: these ops are only used with the types above
}
template <ReduceOp Op>
void user_reduce(void* in, void* inout, int* len, MPI_Datatype* type) {
  reduce_into(dtype_of(*type), Op, inout, in, *len);
}
MPI_Op user_op(ReduceOp op) {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& t = types();
    V().op_create(&user_reduce<ReduceOp::sum>, 1, &t.user_op[static_cast<int>(ReduceOp::sum)]);
    V().op_create(&user_reduce<ReduceOp::max>, 1, &t.user_op[static_cast<int>(ReduceOp::max)]);
    V().op_create(&user_reduce<ReduceOp::min>, 1, &t.user_op[static_cast<int>(ReduceOp::min)]);
    V().op_create(&user_reduce<ReduceOp::product>, 1, &t.user_op[static_cast<int>(ReduceOp::product)]);
  });
  return types().user_op[static_cast<int>(op == ReduceOp::avg ? ReduceOp::sum : op)];
}

// The datatype and op of a reduction: MPI's own where it has the type (bool as bytes: sum is
// logical or, product logical and, as on the other backends), dtensor's otherwise.
std::pair<MPI_Datatype, MPI_Op> reduction(DType t, ReduceOp op) {
  auto builtin = [&](MPI_Datatype x) -> std::pair<MPI_Datatype, MPI_Op> {
    switch (op) {
      case ReduceOp::sum: case ReduceOp::avg: return {x, MPI_SUM};
      case ReduceOp::max: return {x, MPI_MAX};
      case ReduceOp::min: return {x, MPI_MIN};
      case ReduceOp::product: return {x, MPI_PROD};
    }
    return {x, MPI_SUM};
  };
  switch (t) {
    case DType::f64: return builtin(MPI_DOUBLE);
    case DType::f32: return builtin(MPI_FLOAT);
    case DType::i64: return builtin(MPI_INT64_T);
    case DType::i32: return builtin(MPI_INT32_T);
    case DType::i8: return builtin(MPI_INT8_T);
    case DType::u8: return builtin(MPI_UINT8_T);
    case DType::boolean:
      return {MPI_UINT8_T, op == ReduceOp::product || op == ReduceOp::min ? MPI_MIN : MPI_MAX};
    default: return {types().raw[static_cast<int>(t)], user_op(op)};
  }
}

// avg is a sum divided by the group's size
void finish_if_average(MPI_Comm c, ReduceOp op, DType dtype, void* recv, std::int64_t count) {
  if (op != ReduceOp::avg) return;
  int n = 0;
  V().comm_size(c, &n);
  finish_average(dtype, recv, count, n);
}

}  // namespace

MpiCommunicator::MpiCommunicator(Mesh mesh, MPI_Comm comm, MpiOptions options)
    : mesh_(std::move(mesh)), options_(options) {
  int init = 0;
  V().initialized(&init);
  if (!init) throw InputError("MpiCommunicator: MPI is not initialised (call MPI_Init first)");
  if (options_.timeout.count() <= 0)
    throw InputError(fmt::format("the MPI timeout must be positive, not {} ms", options_.timeout.count()));
  int size = 0, r = 0;
  check(V().comm_size(comm, &size), "MPI_Comm_size");
  check(V().comm_rank(comm, &r), "MPI_Comm_rank");
  if (size != mesh_.num_ranks())
    throw InputError(fmt::format("the MPI communicator has {} processes but mesh {} has {} ranks", size, mesh_.str(),
                                 mesh_.num_ranks()));
  rank_ = r;
  check(V().comm_dup(comm, &world_), "MPI_Comm_dup");
  (void)types();
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  V().finalized(&finalized);
  if (finalized) return;
  for (auto& [dims, c] : groups_) V().comm_free(&c);
  if (world_ != MPI_COMM_NULL) V().comm_free(&world_);
}

Memory& MpiCommunicator::memory() { return V().memory(); }

bool MpiCommunicator::supports(Collective c, DType dtype, ReduceOp op) const { return reducible(c, dtype, op); }

int MpiCommunicator::local_rank() const {
  MPI_Comm node;
  check(V().comm_split_type(world_, MPI_COMM_TYPE_SHARED, static_cast<int>(rank_), MPI_INFO_NULL, &node),
        "MPI_Comm_split_type");
  int r = 0;
  V().comm_rank(node, &r);
  V().comm_free(&node);
  return r;
}

void MpiCommunicator::wait(MPI_Request* reqs, int n, const char* kind, const Group& g, std::int64_t count, DType dtype) {
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  int done = 0;
  auto spin = 0;
  while (true) {
    check(V().testall(n, reqs, &done, MPI_STATUSES_IGNORE), fmt::format("{} over {}", kind, describe(mesh_, g)));
    if (done) return;
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr,
                   "error: %s over %s (%lld elements of %s) did not complete within %lld ms on rank %lld (a peer "
                   "missing or stuck); aborting the job (MPI_Abort)\n",
                   kind, describe(mesh_, g).c_str(), static_cast<long long>(count), to_string(dtype).data(),
                   static_cast<long long>(options_.timeout.count()), static_cast<long long>(rank_));
      std::fflush(stderr);
      V().abort(world_, 4);
    }
    if (++spin > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));  // oversubscribed cores
  }
}

MPI_Comm MpiCommunicator::group_comm(const Group& g) {
  if (auto it = groups_.find(g.mesh_dims); it != groups_.end()) return it->second;
  // color: the coordinates off the group; key: the position in the group (row-major, listed order)
  const auto coord = mesh_.coord_of_rank(rank_);
  std::int64_t color = 0, key = 0;
  for (int m = 0; m < mesh_.ndim(); ++m)
    if (std::find(g.mesh_dims.begin(), g.mesh_dims.end(), m) == g.mesh_dims.end())
      color = color * mesh_.size(m) + coord[static_cast<std::size_t>(m)];
  for (int m : g.mesh_dims) {
    if (m < 0 || m >= mesh_.ndim()) throw InputError(fmt::format("group names mesh dim {}, out of range", m));
    key = key * mesh_.size(m) + coord[static_cast<std::size_t>(m)];
  }
  MPI_Comm c;
  check(V().comm_split(world_, static_cast<int>(color), static_cast<int>(key), &c),
        fmt::format("MPI_Comm_split for {}", describe(mesh_, g)));
  groups_.emplace(g.mesh_dims, c);
  return c;
}

std::vector<std::uint64_t> MpiCommunicator::exchange(std::uint64_t value) {
  std::vector<std::uint64_t> out(static_cast<std::size_t>(mesh_.num_ranks()));
  MPI_Request req;
  check(V().iallgather(&value, 1, MPI_UINT64_T, out.data(), 1, MPI_UINT64_T, world_, &req), "an exchange of one value per rank");
  wait(&req, 1, "an exchange of one value per rank (all_gather)", Group{}, 1, DType::i64);
  return out;  // world ranks are global ranks
}

void MpiCommunicator::prepare(std::span<const Group> groups) {
  for (const Group& g : groups) {
    for (int m : g.mesh_dims)
      if (m < 0 || m >= mesh_.ndim())
        throw InputError(fmt::format("group over mesh dim {}: mesh {} has {} dims", m, mesh_.str(), mesh_.ndim()));
    (void)group_comm(g);
  }
}

void MpiCommunicator::all_gather(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) {
  const MPI_Comm c = group_comm(g);
  const MPI_Datatype t = types().raw[static_cast<int>(dtype)];
  const int n = as_int(count, "all_gather");
  MPI_Request req;
  check(V().iallgather(send, n, t, recv, n, t, c, &req), "MPI_Iallgather");
  wait(&req, 1, "all_gather", g, count, dtype);
}

void MpiCommunicator::reduce_scatter(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                                     ReduceOp op) {
  const MPI_Comm c = group_comm(g);
  const auto [t, o] = reduction(dtype, op);
  MPI_Request req;
  check(V().ireduce_scatter_block(send, recv, as_int(count, "reduce_scatter"), t, o, c, &req), "MPI_Ireduce_scatter_block");
  wait(&req, 1, "reduce_scatter", g, count, dtype);
  finish_if_average(c, op, dtype, recv, count);
}

void MpiCommunicator::all_reduce(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                                 ReduceOp op) {
  const MPI_Comm c = group_comm(g);
  const auto [t, o] = reduction(dtype, op);
  MPI_Request req;
  check(V().iallreduce(send == recv ? MPI_IN_PLACE : send, recv, as_int(count, "all_reduce"), t, o, c, &req),
        "MPI_Iallreduce");
  wait(&req, 1, "all_reduce", g, count, dtype);
  finish_if_average(c, op, dtype, recv, count);
}

void MpiCommunicator::all_to_all(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) {
  const MPI_Comm c = group_comm(g);
  const MPI_Datatype t = types().raw[static_cast<int>(dtype)];
  const int n = as_int(count, "all_to_all");
  MPI_Request req;
  check(V().ialltoall(send, n, t, recv, n, t, c, &req), "MPI_Ialltoall");
  wait(&req, 1, "all_to_all", g, count, dtype);
}

void MpiCommunicator::send_recv(std::span<const Transfer> sends, std::span<const Transfer> recvs, DType dtype) {
  const MPI_Datatype t = types().raw[static_cast<int>(dtype)];
  constexpr int kTag = 0x7d7;
  // shifted order (post_order.hpp): no rank's messages all leave last
  mpi_order::shifted(recvs, rank_, mesh_.num_ranks(), true, order_);
  reqs_.clear();
  std::int64_t total = 0;
  for (std::size_t i : order_) {
    const Transfer& r = recvs[i];
    reqs_.emplace_back();
    check(V().irecv(r.buffer, as_int(r.count, "a direct receive"), t, static_cast<int>(r.peer), kTag, world_, &reqs_.back()),
          "MPI_Irecv");
    total += r.count;
  }
  mpi_order::shifted(sends, rank_, mesh_.num_ranks(), false, order_);
  for (std::size_t i : order_) {
    const Transfer& s = sends[i];
    reqs_.emplace_back();
    check(V().isend(s.buffer, as_int(s.count, "a direct send"), t, static_cast<int>(s.peer), kTag, world_, &reqs_.back()),
          "MPI_Isend");
    total += s.count;
  }
  wait(reqs_.data(), static_cast<int>(reqs_.size()), "direct exchange (send/recv)", Group{}, total, dtype);
}

}  // namespace dtensor
