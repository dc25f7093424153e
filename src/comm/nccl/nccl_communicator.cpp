#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "checks.hpp"
#include "dtensor/nccl.hpp"
#include "dtensor/scalar.hpp"
#include "kernels.cuh"

namespace dtensor {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f64: return ncclFloat64;
    case DType::f32: return ncclFloat32;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::f8e4m3: return ncclFloat8e4m3;
    case DType::f8e5m2: return ncclFloat8e5m2;
    case DType::i64: return ncclInt64;
    case DType::i32: return ncclInt32;
    case DType::i8: return ncclInt8;
    case DType::u8: case DType::boolean: return ncclUint8;
  }
  return ncclUint8;
}

// bool as bytes: sum is logical or (max), product logical and (min), as on the simulated backend.
ncclRedOp_t nccl_op(ReduceOp op, DType t) {
  if (t == DType::boolean) return op == ReduceOp::product || op == ReduceOp::min ? ncclMin : ncclMax;
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::product: return ncclProd;
  }
  return ncclSum;
}

std::string group_str(const Mesh& mesh, const Group& g) {
  std::string s;
  for (std::size_t i = 0; i < g.mesh_dims.size(); ++i) s += (i ? " + " : "") + mesh.describe_dim(g.mesh_dims[i]);
  return s.empty() ? "world" : s;
}

}  // namespace

struct NcclCommunicator::State {
  ncclComm_t world = nullptr;
  std::map<std::vector<int>, ncclComm_t> groups;
  int device = 0;
  int cc_major = 0;
};

NcclUniqueId nccl_unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) detail::throw_nccl(r, nullptr, "ncclGetUniqueId");
  NcclUniqueId out;
  static_assert(sizeof(id) == sizeof(out.bytes));
  std::memcpy(out.bytes.data(), &id, sizeof id);
  return out;
}

int nccl_version() {
  int v = 0;
  ncclGetVersion(&v);
  return v;
}

namespace {
// Non-blocking init/split: poll until ready, abort past the timeout or on an error.
void wait_ready(ncclComm_t comm, std::chrono::milliseconds timeout, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ncclResult_t st = ncclInProgress;
  while (true) {
    const ncclResult_t r = ncclCommGetAsyncError(comm, &st);
    if (r != ncclSuccess) st = r;
    if (st != ncclInProgress) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ncclCommAbort(comm);
      throw InputError(fmt::format("{}: timed out after {} ms (peers missing or unreachable); communicator aborted", what,
                              timeout.count()));
    }
    std::this_thread::yield();
  }
  if (st != ncclSuccess) {
    const std::string msg = fmt::format("{}: NCCL error {} ({}): {}", what, static_cast<int>(st), ncclGetErrorString(st),
                                        ncclGetLastError(comm));
    ncclCommAbort(comm);
    throw InputError(msg);
  }
}
}  // namespace

NcclCommunicator::NcclCommunicator(Mesh mesh, std::int64_t rank, const NcclUniqueId& id, NcclOptions options)
    : mesh_(std::move(mesh)), rank_(rank), stream_(options.stream), options_(std::move(options)),
      state_(std::make_unique<State>()) {
  coord_ = mesh_.coord_of_rank(rank_);  // validates the rank
  if (options_.device >= 0) detail::cuda_check(cudaSetDevice(options_.device), "cudaSetDevice");
  detail::cuda_check(cudaGetDevice(&state_->device), "cudaGetDevice");
  cudaDeviceProp prop{};
  detail::cuda_check(cudaGetDeviceProperties(&prop, state_->device), "cudaGetDeviceProperties");
  state_->cc_major = prop.major;
  if (!options_.device_uuids.empty()) {
    if (static_cast<std::int64_t>(options_.device_uuids.size()) != mesh_.num_ranks())
      throw InputError(fmt::format("device_uuids lists {} GPUs for {} ranks", options_.device_uuids.size(), mesh_.num_ranks()));
    for (std::size_t a = 0; a < options_.device_uuids.size(); ++a)
      for (std::size_t b = a + 1; b < options_.device_uuids.size(); ++b)
        if (options_.device_uuids[a] == options_.device_uuids[b])
          throw InputError(fmt::format("ranks {} and {} are both on GPU {}: NCCL needs one GPU per rank; give every rank "
                                  "its own device (e.g. device = local rank, or CUDA_VISIBLE_DEVICES per process)",
                                  a, b, options_.device_uuids[a]));
  }
  ncclUniqueId uid;
  std::memcpy(&uid, id.bytes.data(), sizeof uid);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t r = ncclCommInitRankConfig(&state_->world, static_cast<int>(mesh_.num_ranks()), uid,
                                                static_cast<int>(rank_), &config);
  const std::string what = fmt::format("creating the world communicator of mesh {} on rank {}", mesh_.str(), rank_);
  if (r != ncclSuccess && r != ncclInProgress) detail::throw_nccl(r, state_->world, what);
  wait_ready(state_->world, options_.timeout, what);
}

NcclCommunicator::~NcclCommunicator() {
  for (auto& [dims, c] : state_->groups) ncclCommDestroy(c);
  if (state_->world) ncclCommDestroy(state_->world);
}

void NcclCommunicator::abort() noexcept {
  for (auto& [dims, c] : state_->groups) ncclCommAbort(c);
  state_->groups.clear();
  if (state_->world) ncclCommAbort(state_->world);
  state_->world = nullptr;
}

void NcclCommunicator::check_rank(std::int64_t rank, const char* op) const {
  if (rank != rank_)
    throw InputError(fmt::format("{} issued for rank {} on the communicator of rank {}: one NCCL communicator serves "
                            "its own rank only", op, rank, rank_));
}

void* NcclCommunicator::group_comm(const Group& g, const char* op) {
  if (!state_->world) throw InputError(fmt::format("{}: the communicator was aborted", op));
  if (auto it = state_->groups.find(g.mesh_dims); it != state_->groups.end()) return it->second;
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  detail::cuda_check(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream_), &cap), "cudaStreamIsCapturing");
  if (cap != cudaStreamCaptureStatusNone)
    throw InputError(fmt::format("{} over {}: its communicator does not exist yet and the stream is being captured; call "
                            "NcclCommunicator::prepare(plan) before capturing", op, group_str(mesh_, g)));
  // color: this rank's coordinates off the group; key: its position in the group
  std::int64_t color = 0, key = 0;
  for (int m = 0; m < mesh_.ndim(); ++m)
    if (std::find(g.mesh_dims.begin(), g.mesh_dims.end(), m) == g.mesh_dims.end())
      color = color * mesh_.size(m) + coord_[static_cast<std::size_t>(m)];
  for (int m : g.mesh_dims) key = key * mesh_.size(m) + coord_[static_cast<std::size_t>(m)];
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c = nullptr;
  const std::string what = fmt::format("splitting the communicator of {} on rank {}", group_str(mesh_, g), rank_);
  const ncclResult_t r = ncclCommSplit(state_->world, static_cast<int>(color), static_cast<int>(key), &c, &config);
  if (r != ncclSuccess && r != ncclInProgress) detail::throw_nccl(r, state_->world, what);
  wait_ready(c, options_.timeout, what);
  state_->groups.emplace(g.mesh_dims, c);
  return c;
}

void NcclCommunicator::prepare(const Plan& plan) {
  if (plan.mesh != mesh_) throw InputError(fmt::format("plan mesh {} is not this communicator's mesh {}", plan.mesh.str(), mesh_.str()));
  for (const auto& s : plan.steps) {
    if (s.kind == StepKind::all_gather || s.kind == StepKind::reduce_scatter || s.kind == StepKind::all_reduce ||
        s.kind == StepKind::all_to_all)
      (void)group_comm(Group{s.mesh_dims}, to_string(s.kind).data());
  }
}

bool NcclCommunicator::supports(StepKind kind, DType dtype, ReduceOp op) const {
  const bool reduces = kind == StepKind::reduce_scatter || kind == StepKind::all_reduce;
  if (!reduces) return true;
  if (dtype == DType::boolean && op == ReduceOp::avg) return false;
  if (dtype == DType::f8e4m3 || dtype == DType::f8e5m2)  // fp8 reductions: NCCL >= 2.24 on sm_90+
    return nccl_version() >= 22400 && state_->cc_major >= 9;
  return true;
}

namespace {
void after(ncclResult_t r, ncclComm_t comm, const std::string& what) {
  if (r != ncclSuccess && r != ncclInProgress) detail::throw_nccl(r, comm, what);
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  if (async != ncclSuccess && async != ncclInProgress) detail::throw_nccl(async, comm, what);
}
}  // namespace

void NcclCommunicator::all_gather(std::int64_t rank, const Group& g, const void* send, void* recv, std::int64_t count,
                                  DType dtype) {
  check_rank(rank, "all_gather");
  auto* c = static_cast<ncclComm_t>(group_comm(g, "all_gather"));
  after(ncclAllGather(send, recv, static_cast<size_t>(count), nccl_type(dtype), c, static_cast<cudaStream_t>(stream_)), c,
        fmt::format("all_gather over {} ({} elements of {})", group_str(mesh_, g), count, to_string(dtype)));
}

void NcclCommunicator::reduce_scatter(std::int64_t rank, const Group& g, const void* send, void* recv,
                                      std::int64_t count, DType dtype, ReduceOp op) {
  check_rank(rank, "reduce_scatter");
  auto* c = static_cast<ncclComm_t>(group_comm(g, "reduce_scatter"));
  after(ncclReduceScatter(send, recv, static_cast<size_t>(count), nccl_type(dtype), nccl_op(op, dtype), c,
                          static_cast<cudaStream_t>(stream_)),
        c, fmt::format("reduce_scatter({}) over {} ({} elements of {})", to_string(op), group_str(mesh_, g), count,
                       to_string(dtype)));
}

void NcclCommunicator::all_reduce(std::int64_t rank, const Group& g, const void* send, void* recv, std::int64_t count,
                                  DType dtype, ReduceOp op) {
  check_rank(rank, "all_reduce");
  auto* c = static_cast<ncclComm_t>(group_comm(g, "all_reduce"));
  after(ncclAllReduce(send, recv, static_cast<size_t>(count), nccl_type(dtype), nccl_op(op, dtype), c,
                      static_cast<cudaStream_t>(stream_)),
        c, fmt::format("all_reduce({}) over {} ({} elements of {})", to_string(op), group_str(mesh_, g), count,
                       to_string(dtype)));
}

void NcclCommunicator::all_to_all(std::int64_t rank, const Group& g, const void* send, void* recv, std::int64_t count,
                                  DType dtype) {
  check_rank(rank, "all_to_all");
  auto* c = static_cast<ncclComm_t>(group_comm(g, "all_to_all"));
  int n = 0;
  ncclCommCount(c, &n);
  const auto bytes = count * static_cast<std::int64_t>(itemsize(dtype));
  const std::string what = fmt::format("all_to_all over {} ({} elements of {} per peer)", group_str(mesh_, g), count,
                                       to_string(dtype));
  after(ncclGroupStart(), c, what);
  for (int p = 0; p < n; ++p) {
    after(ncclSend(static_cast<const char*>(send) + p * bytes, static_cast<size_t>(count), nccl_type(dtype), p, c,
                   static_cast<cudaStream_t>(stream_)), c, what);
    after(ncclRecv(static_cast<char*>(recv) + p * bytes, static_cast<size_t>(count), nccl_type(dtype), p, c,
                   static_cast<cudaStream_t>(stream_)), c, what);
  }
  after(ncclGroupEnd(), c, what);
}

void NcclCommunicator::send_recv(std::int64_t rank, std::span<const Transfer> sends, std::span<const Transfer> recvs,
                                 DType dtype) {
  check_rank(rank, "send_recv");
  if (!state_->world) throw InputError("send_recv: the communicator was aborted");
  ncclComm_t c = state_->world;  // world ranks are global ranks
  const std::string what = fmt::format("grouped send/recv on rank {} ({} sends, {} recvs)", rank_, sends.size(), recvs.size());
  after(ncclGroupStart(), c, what);
  for (const auto& s : sends)
    after(ncclSend(s.buffer, static_cast<size_t>(s.count), nccl_type(dtype), static_cast<int>(s.peer), c,
                   static_cast<cudaStream_t>(stream_)), c, what);
  for (const auto& r : recvs)
    after(ncclRecv(r.buffer, static_cast<size_t>(r.count), nccl_type(dtype), static_cast<int>(r.peer), c,
                   static_cast<cudaStream_t>(stream_)), c, what);
  after(ncclGroupEnd(), c, what);
}

void NcclCommunicator::synchronize() {
  // Stream order already sequences every later kernel after the collectives: nothing to wait for.
}

void NcclCommunicator::copy(void* dst, const void* src, std::int64_t bytes) {
  if (bytes <= 0 || dst == src) return;
  detail::cuda_check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                     static_cast<cudaStream_t>(stream_)), "local copy");
}

namespace {
std::uint64_t pattern_of(DType dtype, double value) {
  unsigned char buf[8] = {};
  store_element(dtype, buf, 0, value);
  std::uint64_t p = 0;
  std::memcpy(&p, buf, sizeof p);
  return p;
}
cuda::StridedCopy strided(std::int64_t run_bytes, std::span<const std::int64_t> count,
                          std::span<const std::int64_t> ds, std::span<const std::int64_t> ss) {
  cuda::StridedCopy c;
  if (count.size() > static_cast<std::size_t>(cuda::kMaxDims)) throw InputError("strided copy has too many dims");
  c.run_bytes = run_bytes;
  c.ndim = static_cast<int>(count.size());
  for (std::size_t k = 0; k < count.size(); ++k) {
    c.count[k] = count[k];
    c.dst_stride[k] = ds[k];
    c.src_stride[k] = ss[k];
  }
  return c;
}
}  // namespace

void NcclCommunicator::fill(void* dst, DType dtype, std::int64_t count, double value) {
  detail::cuda_check(cuda::launch_fill(dst, pattern_of(dtype, value), static_cast<int>(itemsize(dtype)), count,
                                       static_cast<cudaStream_t>(stream_)), "fill kernel");
}

void NcclCommunicator::copy_strided(void* dst, const void* src, std::int64_t run_bytes,
                                    std::span<const std::int64_t> count, std::span<const std::int64_t> dst_stride,
                                    std::span<const std::int64_t> src_stride) {
  detail::cuda_check(cuda::launch_copy_strided(dst, src, strided(run_bytes, count, dst_stride, src_stride),
                                               static_cast<cudaStream_t>(stream_)), "pack/unpack kernel");
}

// ---------------------------------------------------------------- device-simulated backend

DeviceSimulatedCommunicator::DeviceSimulatedCommunicator(Mesh mesh, void* stream)
    : SimulatedCommunicator(std::move(mesh)), stream_(stream) {}

bool DeviceSimulatedCommunicator::supports(StepKind kind, DType dtype, ReduceOp op) const {
  const bool reduces = kind == StepKind::reduce_scatter || kind == StepKind::all_reduce;
  return !(reduces && dtype == DType::boolean && op == ReduceOp::avg);
}

void DeviceSimulatedCommunicator::copy(void* dst, const void* src, std::int64_t bytes) { move(dst, src, bytes); }

void DeviceSimulatedCommunicator::move(void* dst, const void* src, std::int64_t bytes) {
  if (bytes <= 0 || dst == src) return;
  detail::cuda_check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                                     static_cast<cudaStream_t>(stream_)), "device copy");
}

void DeviceSimulatedCommunicator::fill(void* dst, DType dtype, std::int64_t count, double value) {
  detail::cuda_check(cuda::launch_fill(dst, pattern_of(dtype, value), static_cast<int>(itemsize(dtype)), count,
                                       static_cast<cudaStream_t>(stream_)), "fill kernel");
}

void DeviceSimulatedCommunicator::copy_strided(void* dst, const void* src, std::int64_t run_bytes,
                                               std::span<const std::int64_t> count,
                                               std::span<const std::int64_t> dst_stride,
                                               std::span<const std::int64_t> src_stride) {
  detail::cuda_check(cuda::launch_copy_strided(dst, src, strided(run_bytes, count, dst_stride, src_stride),
                                               static_cast<cudaStream_t>(stream_)), "pack/unpack kernel");
}

void DeviceSimulatedCommunicator::reduce_group(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs,
                                               std::int64_t count) {
  // pairwise, rounding to the dtype after each member (as NCCL's ring does)
  move(out, inputs[0], count * static_cast<std::int64_t>(itemsize(dtype)));
  for (std::size_t s = 1; s < inputs.size(); ++s)
    detail::cuda_check(cuda::launch_reduce(static_cast<int>(dtype), static_cast<int>(op), out, inputs[s], count,
                                           static_cast<cudaStream_t>(stream_)), "reduction kernel");
  if (op == ReduceOp::avg)
    detail::cuda_check(cuda::launch_average(static_cast<int>(dtype), out, count, static_cast<std::int64_t>(inputs.size()),
                                            static_cast<cudaStream_t>(stream_)), "average kernel");
}

}  // namespace dtensor
