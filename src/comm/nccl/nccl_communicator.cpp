#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <map>
#include <cstring>
#include <cstdlib>
#include <exception>
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

namespace {
// After every call on a non-blocking communicator. NCCL's non-blocking mode: a call may return
// ncclInProgress, and then no further call may be issued on that communicator until
// ncclCommGetAsyncError stops reporting ncclInProgress (else ncclInvalidUsage: "Attempt to use
// communicator before the previous operation returned ncclSuccess"). So: poll until it is no
// longer in progress (at most `timeout`, then `on_timeout` aborts and a BackendError names the
// call), and fail on any error. When the call returned ncclSuccess and nothing is in progress,
// this costs one ncclCommGetAsyncError. The description is built only when something failed.
template <typename Describe, typename Abort>
void after(ncclResult_t r, ncclComm_t comm, std::chrono::milliseconds timeout, const Describe& what, Abort&& on_timeout) {
  if (r != ncclSuccess && r != ncclInProgress) detail::throw_nccl(r, comm, what());
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  if (async == ncclInProgress) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (async == ncclInProgress) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::string msg = fmt::format("{}: still in progress after {} ms (a peer missing or stuck); communicators aborted",
                                      what(), timeout.count());
        on_timeout();
        throw BackendError(std::move(msg));
      }
      std::this_thread::yield();
      ncclCommGetAsyncError(comm, &async);
    }
  }
  if (async != ncclSuccess) detail::throw_nccl(async, comm, what());
}
}  // namespace

struct NcclCommunicator::State {
  ncclComm_t world = nullptr;
  bool borrowed = false;  // the world communicator is the caller's: never destroyed or aborted here
  std::map<std::vector<int>, ncclComm_t> groups;
  int device = 0;
  int cc_major = 0;
  const char* last_kind = nullptr;  // the last collective issued, for the watchdog's message
  std::vector<int> last_dims;
  std::int64_t last_count = 0;
  DType last_dtype = DType::f32;
};

void NcclCommunicator::note(const char* kind, const Group& g, std::int64_t count, DType dtype) noexcept {
  state_->last_kind = kind;
  state_->last_dims.assign(g.mesh_dims.begin(), g.mesh_dims.end());  // no allocation once sized
  state_->last_count = count;
  state_->last_dtype = dtype;
}

std::string NcclCommunicator::last_op() const {
  if (!state_->last_kind) return "nothing issued yet";
  return fmt::format("{} over {} ({} elements of {})", state_->last_kind, group_str(mesh_, Group{state_->last_dims}),
                     state_->last_count, to_string(state_->last_dtype));
}

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

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

int local_device() {
  for (const char* var : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* v = std::getenv(var); v && *v) {
      char* end = nullptr;
      const long r = std::strtol(v, &end, 10);
      if (*end != '\0' || r < 0) throw InputError(fmt::format("{}={} is not a local rank", var, v));
      const int n = cuda_device_count();
      return n > 0 ? static_cast<int>(r % n) : 0;
    }
  return 0;
}

namespace {
// Non-blocking init/split: poll until ready; past the timeout or on an error, abort `comm` (unless
// the caller aborts itself: `abort_comm` false) and throw.
void wait_ready(ncclComm_t comm, std::chrono::milliseconds timeout, const std::string& what, bool abort_comm = true) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  ncclResult_t st = ncclInProgress;
  while (true) {
    const ncclResult_t r = ncclCommGetAsyncError(comm, &st);
    if (r != ncclSuccess) st = r;
    if (st != ncclInProgress) break;
    if (std::chrono::steady_clock::now() > deadline) {
      if (abort_comm) ncclCommAbort(comm);
      throw BackendError(fmt::format("{}: timed out after {} ms (peers missing or unreachable); communicator aborted", what,
                              timeout.count()));
    }
    std::this_thread::yield();
  }
  if (st != ncclSuccess) {
    const std::string msg = fmt::format("{}: NCCL error {} ({}): {}", what, static_cast<int>(st), ncclGetErrorString(st),
                                        ncclGetLastError(comm));
    if (abort_comm) ncclCommAbort(comm);
    throw BackendError(msg);
  }
}
}  // namespace

void NcclCommunicator::init_device() {
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
}

NcclCommunicator::NcclCommunicator(Mesh mesh, std::int64_t rank, const NcclUniqueId& id, NcclOptions options)
    : mesh_(std::move(mesh)), rank_(rank), stream_(options.stream), options_(std::move(options)),
      state_(std::make_unique<State>()) {
  init_device();
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

NcclCommunicator::NcclCommunicator(Mesh mesh, void* borrowed, NcclOptions options)
    : mesh_(std::move(mesh)), stream_(options.stream), options_(std::move(options)), state_(std::make_unique<State>()) {
  if (!borrowed) throw InputError("the borrowed NCCL communicator is null");
  auto* c = static_cast<ncclComm_t>(borrowed);
  int n = 0, r = 0, dev = 0;
  detail::check_nccl(ncclCommCount(c, &n), c, "ncclCommCount of the borrowed communicator");
  detail::check_nccl(ncclCommUserRank(c, &r), c, "ncclCommUserRank of the borrowed communicator");
  detail::check_nccl(ncclCommCuDevice(c, &dev), c, "ncclCommCuDevice of the borrowed communicator");
  if (n != mesh_.num_ranks())
    throw InputError(fmt::format("the borrowed NCCL communicator has {} ranks but mesh {} has {}", n, mesh_.str(),
                                 mesh_.num_ranks()));
  if (options_.device >= 0 && options_.device != dev)
    throw InputError(fmt::format("options.device is {} but the borrowed communicator lives on device {}", options_.device, dev));
  options_.device = dev;
  rank_ = r;
  init_device();
  state_->world = c;
  state_->borrowed = true;
}

std::vector<std::unique_ptr<NcclCommunicator>> NcclCommunicator::local_world(Mesh mesh, std::vector<int> devices,
                                                                             std::chrono::milliseconds timeout) {
  if (static_cast<std::int64_t>(devices.size()) != mesh.num_ranks())
    throw InputError(fmt::format("local_world got {} devices for mesh {} of {} ranks", devices.size(), mesh.str(),
                                 mesh.num_ranks()));
  const int visible = cuda_device_count();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] < 0 || devices[i] >= visible)
      throw InputError(fmt::format("device {} of rank {} is not among the {} visible CUDA devices", devices[i], i, visible));
    for (std::size_t j = 0; j < i; ++j)
      if (devices[j] == devices[i])
        throw InputError(fmt::format("ranks {} and {} are both on device {}: NCCL needs one GPU per rank", j, i, devices[i]));
  }
  const NcclUniqueId id = nccl_unique_id();
  std::vector<std::unique_ptr<NcclCommunicator>> out(devices.size());
  std::vector<std::exception_ptr> errors(devices.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < devices.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        NcclOptions o;
        o.device = devices[r];
        o.timeout = timeout;
        out[r] = std::make_unique<NcclCommunicator>(mesh, static_cast<std::int64_t>(r), id, o);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

NcclCommunicator::~NcclCommunicator() {
  for (auto& [dims, c] : state_->groups) ncclCommDestroy(c);
  if (state_->world && !state_->borrowed) ncclCommDestroy(state_->world);
}

void NcclCommunicator::abort() noexcept {
  for (auto& [dims, c] : state_->groups) ncclCommAbort(c);
  state_->groups.clear();
  if (state_->world && !state_->borrowed) ncclCommAbort(state_->world);
  state_->world = nullptr;
}

tune::Memory nccl_device_memory(NcclCommunicator& comm) {
  int device = 0;
  detail::cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  tune::Memory m;
  m.allocate = [device](std::size_t bytes) -> void* {
    detail::cuda_check(cudaSetDevice(device), "cudaSetDevice");
    void* p = nullptr;
    detail::cuda_check(cudaMalloc(&p, bytes), "tune buffer");
    return p;
  };
  m.release = [](void* p) { (void)cudaFree(p); };
  m.upload = [&comm](void* dst, const void* src, std::size_t bytes) {
    comm.wait();
    detail::cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "tune upload");
  };
  m.download = [&comm](void* dst, const void* src, std::size_t bytes) {
    comm.wait();
    detail::cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "tune download");
  };
  m.wait = [&comm] { comm.wait(); };
  return m;
}

void NcclCommunicator::wait() {
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  auto* st = static_cast<cudaStream_t>(stream_);
  while (true) {
    const cudaError_t q = cudaStreamQuery(st);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) detail::throw_cuda(q, fmt::format("waiting for {} on rank {}", last_op(), rank_));
    std::vector<ncclComm_t> comms;
    if (state_->world) comms.push_back(state_->world);
    for (auto& [d, c] : state_->groups) comms.push_back(c);
    for (auto* c : comms) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(c, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        const std::string msg = fmt::format("{} on rank {} failed: NCCL error {} ({}); communicators aborted",
                                            last_op(), rank_, static_cast<int>(async), ncclGetErrorString(async));
        abort();
        throw BackendError(msg);
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      abort();
      throw BackendError(fmt::format("{} did not complete within {} ms on rank {} (a peer missing or stuck); "
                                     "communicators aborted", last_op(), options_.timeout.count(), rank_));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::vector<std::uint64_t> NcclCommunicator::exchange(std::uint64_t value) {
  if (!state_->world) throw BackendError("exchange: the communicator was aborted");
  const auto n = static_cast<std::size_t>(mesh_.num_ranks());
  void* buf = nullptr;
  detail::cuda_check(cudaMalloc(&buf, 8 * (n + 1)), "exchange buffer");
  std::vector<std::uint64_t> out(n);
  try {
    auto* st = static_cast<cudaStream_t>(stream_);
    auto* mine = static_cast<char*>(buf) + 8 * n;
    detail::cuda_check(cudaMemcpyAsync(mine, &value, 8, cudaMemcpyHostToDevice, st), "exchange upload");
    Group world;
    for (int d = 0; d < mesh_.ndim(); ++d) world.mesh_dims.push_back(d);
    note("the plan-hash exchange (all_gather)", world, 1, DType::i64);
    after(ncclAllGather(mine, buf, 1, ncclUint64, state_->world, st), state_->world, options_.timeout, [&] { return last_op(); },
          [this] { abort(); });
    wait();
    detail::cuda_check(cudaMemcpy(out.data(), buf, 8 * n, cudaMemcpyDeviceToHost), "exchange download");
  } catch (...) {
    cudaFree(buf);
    throw;
  }
  cudaFree(buf);
  return out;  // world ranks are global ranks
}

void* NcclCommunicator::group_comm(const Group& g, const char* op) {
  if (!state_->world) throw BackendError(fmt::format("{}: the communicator was aborted", op));
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
  // With a non-blocking parent the split returns at once and leaves the handle NULL: it appears
  // once the parent is no longer in progress (NCCL's non-blocking semantics; a blocking parent
  // gives it at once). Then the child itself may still be initialising.
  if (c == nullptr) {
    try {
      wait_ready(state_->world, options_.timeout, what, false);
    } catch (...) {
      abort();  // the world and every group, once (a borrowed world is left to its owner)
      throw;
    }
  }
  if (c == nullptr) {
    abort();
    throw BackendError(fmt::format("{}: NCCL gave no communicator once the split completed; communicators aborted", what));
  }
  wait_ready(c, options_.timeout, what);
  state_->groups.emplace(g.mesh_dims, c);
  return c;
}

void NcclCommunicator::prepare(const Plan& plan) {
  if (plan.mesh() != mesh_)
    throw InputError(fmt::format("plan mesh {} is not this communicator's mesh {}", plan.mesh().str(), mesh_.str()));
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


void NcclCommunicator::all_gather(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) {
  auto* c = static_cast<ncclComm_t>(group_comm(g, "all_gather"));
  note("all_gather", g, count, dtype);
  after(ncclAllGather(send, recv, static_cast<size_t>(count), nccl_type(dtype), c, static_cast<cudaStream_t>(stream_)), c,
        options_.timeout, [&] { return last_op(); }, [this] { abort(); });
}

void NcclCommunicator::reduce_scatter(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                                      ReduceOp op) {
  auto* c = static_cast<ncclComm_t>(group_comm(g, "reduce_scatter"));
  note("reduce_scatter", g, count, dtype);
  after(ncclReduceScatter(send, recv, static_cast<size_t>(count), nccl_type(dtype), nccl_op(op, dtype), c,
                          static_cast<cudaStream_t>(stream_)),
        c, options_.timeout, [&] { return last_op() + fmt::format(" op {}", to_string(op)); }, [this] { abort(); });
}

void NcclCommunicator::all_reduce(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                                  ReduceOp op) {
  auto* c = static_cast<ncclComm_t>(group_comm(g, "all_reduce"));
  note("all_reduce", g, count, dtype);
  after(ncclAllReduce(send, recv, static_cast<size_t>(count), nccl_type(dtype), nccl_op(op, dtype), c,
                      static_cast<cudaStream_t>(stream_)),
        c, options_.timeout, [&] { return last_op() + fmt::format(" op {}", to_string(op)); }, [this] { abort(); });
}

void NcclCommunicator::all_to_all(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) {
  auto* c = static_cast<ncclComm_t>(group_comm(g, "all_to_all"));
  note("all_to_all", g, count, dtype);
  int n = 0;
  ncclCommCount(c, &n);
  const auto bytes = count * static_cast<std::int64_t>(itemsize(dtype));
  const auto what = [&] { return last_op(); };
  after(ncclGroupStart(), c, options_.timeout, what, [this] { abort(); });
  for (int p = 0; p < n; ++p) {
    after(ncclSend(static_cast<const char*>(send) + p * bytes, static_cast<size_t>(count), nccl_type(dtype), p, c,
                   static_cast<cudaStream_t>(stream_)), c, options_.timeout, what, [this] { abort(); });
    after(ncclRecv(static_cast<char*>(recv) + p * bytes, static_cast<size_t>(count), nccl_type(dtype), p, c,
                   static_cast<cudaStream_t>(stream_)), c, options_.timeout, what, [this] { abort(); });
  }
  after(ncclGroupEnd(), c, options_.timeout, what, [this] { abort(); });
}

void NcclCommunicator::send_recv(std::span<const Transfer> sends, std::span<const Transfer> recvs, DType dtype) {
  if (!state_->world) throw BackendError("send_recv: the communicator was aborted");
  ncclComm_t c = state_->world;  // world ranks are global ranks
  note("direct exchange (grouped send/recv)", Group{}, static_cast<std::int64_t>(sends.size() + recvs.size()), dtype);
  const auto what = [&] {
    return fmt::format("grouped send/recv on rank {} ({} sends, {} recvs)", rank_, sends.size(), recvs.size());
  };
  after(ncclGroupStart(), c, options_.timeout, what, [this] { abort(); });
  for (const auto& s : sends)
    after(ncclSend(s.buffer, static_cast<size_t>(s.count), nccl_type(dtype), static_cast<int>(s.peer), c,
                   static_cast<cudaStream_t>(stream_)), c, options_.timeout, what, [this] { abort(); });
  for (const auto& r : recvs)
    after(ncclRecv(r.buffer, static_cast<size_t>(r.count), nccl_type(dtype), static_cast<int>(r.peer), c,
                   static_cast<cudaStream_t>(stream_)), c, options_.timeout, what, [this] { abort(); });
  after(ncclGroupEnd(), c, options_.timeout, what, [this] { abort(); });
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

// ---------------------------------------------------------------- device memory for the in-process backend

namespace {
class DeviceMemory final : public SimulatedMemory {
 public:
  explicit DeviceMemory(void* stream) : stream_(static_cast<cudaStream_t>(stream)) {}
  [[nodiscard]] bool supports(StepKind kind, DType dtype, ReduceOp op) const override {
    const bool reduces = kind == StepKind::reduce_scatter || kind == StepKind::all_reduce;
    return !(reduces && dtype == DType::boolean && op == ReduceOp::avg);
  }
  void move(void* dst, const void* src, std::int64_t bytes) override {
    if (bytes <= 0 || dst == src) return;
    detail::cuda_check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream_),
                       "device copy");
  }
  void fill(void* dst, DType dtype, std::int64_t count, double value) override {
    detail::cuda_check(cuda::launch_fill(dst, pattern_of(dtype, value), static_cast<int>(itemsize(dtype)), count, stream_),
                       "fill kernel");
  }
  void copy_strided(void* dst, const void* src, std::int64_t run_bytes, std::span<const std::int64_t> count,
                    std::span<const std::int64_t> dst_stride, std::span<const std::int64_t> src_stride) override {
    detail::cuda_check(cuda::launch_copy_strided(dst, src, strided(run_bytes, count, dst_stride, src_stride), stream_),
                       "pack/unpack kernel");
  }
  void reduce(DType dtype, ReduceOp op, void* out, std::span<const void* const> inputs, std::int64_t count) override {
    const bool narrow = dtype == DType::bf16 || dtype == DType::f16 || dtype == DType::f8e4m3 || dtype == DType::f8e5m2;
    if (narrow) {  // widened, reduced, rounded once: the CPU executor's bits
      if (inputs.size() > static_cast<std::size_t>(cuda::kMaxMembers))
        throw InputError(fmt::format("a device reduction of {} over {} members: at most {}", to_string(dtype),
                                     inputs.size(), cuda::kMaxMembers));
      cuda::Members m;
      for (std::size_t s = 0; s < inputs.size(); ++s) m.p[s] = inputs[s];
      detail::cuda_check(cuda::launch_reduce_members(static_cast<int>(dtype), static_cast<int>(op), out, m,
                                                     static_cast<int>(inputs.size()), count, stream_),
                         "reduction kernel");
      return;
    }
    // wide types: pairwise in the dtype (as the CPU executor), avg divided once at the end
    move(out, inputs[0], count * static_cast<std::int64_t>(itemsize(dtype)));
    for (std::size_t s = 1; s < inputs.size(); ++s)
      detail::cuda_check(cuda::launch_reduce(static_cast<int>(dtype), static_cast<int>(op), out, inputs[s], count, stream_),
                         "reduction kernel");
    if (op == ReduceOp::avg)
      detail::cuda_check(cuda::launch_average(static_cast<int>(dtype), out, count,
                                              static_cast<std::int64_t>(inputs.size()), stream_),
                         "average kernel");
  }

 private:
  cudaStream_t stream_;
};
}  // namespace

std::shared_ptr<SimulatedMemory> device_memory(void* stream) { return std::make_shared<DeviceMemory>(stream); }

}  // namespace dtensor
