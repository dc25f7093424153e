// The NCCL backend's host logic: communicator creation and splitting, member order, NCCL's
// non-blocking protocol, the watchdog, plan-hash exchange and stream-ordered local copies. Every
// vendor call goes through the table of vendor.hpp, so this file includes no CUDA or NCCL header
// and is compiled twice: against the real vendors (dtensor::nccl) and against the CPU stand-in
// that CI runs on every commit (tests/test_nccl_cpu.cpp).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <thread>

#include "dtensor/error.hpp"
#include "dtensor/nccl.hpp"
#include "dtensor/scalar.hpp"
#include "device_args.hpp"
#include "device_memory.hpp"
#include "vendor.hpp"

namespace dtensor {
namespace {
namespace nv = nccl_vendor;
const nv::Table& V() { return nv::table(); }

nv::DataType nccl_type(DType t) {
  switch (t) {
    case DType::f64: return nv::kFloat64;
    case DType::f32: return nv::kFloat32;
    case DType::bf16: return nv::kBfloat16;
    case DType::f16: return nv::kFloat16;
    case DType::f8e4m3: return nv::kFloat8e4m3;
    case DType::f8e5m2: return nv::kFloat8e5m2;
    case DType::i64: return nv::kInt64;
    case DType::i32: return nv::kInt32;
    case DType::i8: return nv::kInt8;
    case DType::u8: case DType::boolean: return nv::kUint8;
  }
  return nv::kUint8;
}

// bool as bytes: sum is logical or (max), product logical and (min), as on the simulated backend.
nv::RedOp nccl_op(ReduceOp op, DType t) {
  if (t == DType::boolean) return op == ReduceOp::product || op == ReduceOp::min ? nv::kMin : nv::kMax;
  switch (op) {
    case ReduceOp::sum: return nv::kSum;
    case ReduceOp::avg: return nv::kAvg;
    case ReduceOp::max: return nv::kMax;
    case ReduceOp::min: return nv::kMin;
    case ReduceOp::product: return nv::kProd;
  }
  return nv::kSum;
}


// Foreign errors are translated here, once: the operation, the group, NCCL's/CUDA's own words.
[[noreturn]] void throw_cuda(int e, const std::string& what) {
  throw BackendError(fmt::format("{}: CUDA error {} ({})", what, V().cuda_error_name(e), V().cuda_error_string(e)));
}
void cuda_check(int e, const std::string& what) {
  if (e != nv::kCudaSuccess) throw_cuda(e, what);
}
[[noreturn]] void throw_nccl(nv::Result r, nv::Comm comm, const std::string& what) {
  const char* last = comm ? V().last_error(comm) : nullptr;
  throw BackendError(fmt::format("{}: NCCL error {} ({}){}", what, static_cast<int>(r), V().error_string(r),
                                 last && *last ? fmt::format(": {}", last) : std::string()));
}
void check_nccl(nv::Result r, nv::Comm comm, const std::string& what) {
  if (r != nv::kSuccess) throw_nccl(r, comm, what);
}

// After every call on a non-blocking communicator. NCCL's non-blocking mode: a call may return
// ncclInProgress, and then no further call may be issued on that communicator until
// ncclCommGetAsyncError stops reporting ncclInProgress (else ncclInvalidUsage: "Attempt to use
// communicator before the previous operation returned ncclSuccess"). So: poll until it is no
// longer in progress (at most `timeout`, then `on_timeout` aborts and a BackendError names the
// call), and fail on any error. When the call returned ncclSuccess and nothing is in progress,
// this costs one ncclCommGetAsyncError. The description is built only when something failed.
template <typename Describe, typename Abort>
void after(nv::Result r, nv::Comm comm, std::chrono::milliseconds timeout, const Describe& what, Abort&& on_timeout) {
  if (r != nv::kSuccess && r != nv::kInProgress) throw_nccl(r, comm, what());
  nv::Result async = nv::kSuccess;
  V().comm_get_async_error(comm, &async);
  if (async == nv::kInProgress) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (async == nv::kInProgress) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::string msg = fmt::format("{}: still in progress after {} ms (a peer missing or stuck); communicators aborted",
                                      what(), timeout.count());
        on_timeout();
        throw BackendError(std::move(msg));
      }
      std::this_thread::yield();
      V().comm_get_async_error(comm, &async);
    }
  }
  if (async != nv::kSuccess) throw_nccl(async, comm, what());
}
}  // namespace

struct NcclCommunicator::State {
  nv::Comm world = nullptr;
  bool borrowed = false;  // the world communicator is the caller's: never destroyed or aborted here
  std::map<std::vector<int>, nv::Comm> groups;
  std::vector<nv::Comm> all;  // world and groups, for the watchdog (no allocation while waiting)
  int group_depth = 0;             // group_begin() calls not yet ended
  std::vector<nv::Comm> in_group;  // the communicators the open group's collectives ran on
  // Inside an open group, notes that a collective runs on `c` (group_end waits on each).
  void grouped_on(nv::Comm c) {
    if (group_depth > 0 && std::find(in_group.begin(), in_group.end(), c) == in_group.end()) in_group.push_back(c);
  }
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
  return fmt::format("{} over {} ({} elements of {})", state_->last_kind, describe(mesh_, Group{state_->last_dims}),
                     state_->last_count, to_string(state_->last_dtype));
}

NcclUniqueId nccl_unique_id() {
  nv::UniqueId id{};
  const nv::Result r = V().get_unique_id(&id);
  if (r != nv::kSuccess) throw_nccl(r, nullptr, "ncclGetUniqueId");
  NcclUniqueId out;
  static_assert(sizeof(id.bytes) == sizeof(out.bytes));
  std::memcpy(out.bytes.data(), id.bytes, sizeof id.bytes);
  return out;
}

int nccl_version() { return V().version(); }

int cuda_device_count() {
  int n = 0;
  if (V().device_count(&n) != nv::kCudaSuccess) {
    V().clear_cuda_error();
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
void wait_ready(nv::Comm comm, std::chrono::milliseconds timeout, const std::string& what, bool abort_comm = true) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  nv::Result st = nv::kInProgress;
  while (true) {
    const nv::Result r = V().comm_get_async_error(comm, &st);
    if (r != nv::kSuccess) st = r;
    if (st != nv::kInProgress) break;
    if (std::chrono::steady_clock::now() > deadline) {
      if (abort_comm) V().comm_abort(comm);
      throw BackendError(fmt::format("{}: timed out after {} ms (peers missing or unreachable); communicator aborted", what,
                                     timeout.count()));
    }
    std::this_thread::yield();
  }
  if (st != nv::kSuccess) {
    const char* last = V().last_error(comm);
    const std::string msg = fmt::format("{}: NCCL error {} ({}): {}", what, static_cast<int>(st), V().error_string(st),
                                        last ? last : "");
    if (abort_comm) V().comm_abort(comm);
    throw BackendError(msg);
  }
}
}  // namespace

void NcclCommunicator::init_device() {
  coord_ = mesh_.coord_of_rank(rank_);  // validates the rank
  if (options_.device >= 0) cuda_check(V().set_device(options_.device), "cudaSetDevice");
  cuda_check(V().get_device(&state_->device), "cudaGetDevice");
  cuda_check(V().compute_capability_major(state_->device, &state_->cc_major), "cudaDeviceGetAttribute");
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
  nv::UniqueId uid{};
  std::memcpy(uid.bytes, id.bytes.data(), sizeof uid.bytes);
  const nv::Result r = V().comm_init_rank(&state_->world, static_cast<int>(mesh_.num_ranks()), uid, static_cast<int>(rank_),
                                          /*blocking=*/false);
  const std::string what = fmt::format("creating the world communicator of mesh {} on rank {}", mesh_.str(), rank_);
  if (r != nv::kSuccess && r != nv::kInProgress) {
    if (state_->world) V().comm_abort(state_->world);
    state_->world = nullptr;
    throw_nccl(r, nullptr, what);
  }
  try {
    wait_ready(state_->world, options_.timeout, what);
  } catch (...) {
    state_->world = nullptr;  // aborted by wait_ready
    throw;
  }
  state_->all.push_back(state_->world);
}

NcclCommunicator::NcclCommunicator(Mesh mesh, void* borrowed, NcclOptions options)
    : mesh_(std::move(mesh)), stream_(options.stream), options_(std::move(options)), state_(std::make_unique<State>()) {
  if (!borrowed) throw InputError("the borrowed NCCL communicator is null");
  nv::Comm c = borrowed;
  int n = 0, r = 0, dev = 0;
  check_nccl(V().comm_count(c, &n), c, "ncclCommCount of the borrowed communicator");
  check_nccl(V().comm_user_rank(c, &r), c, "ncclCommUserRank of the borrowed communicator");
  check_nccl(V().comm_cu_device(c, &dev), c, "ncclCommCuDevice of the borrowed communicator");
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
  state_->all.push_back(c);
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
  for (auto& [dims, c] : state_->groups) V().comm_destroy(c);
  if (state_->world && !state_->borrowed) V().comm_destroy(state_->world);
}

void NcclCommunicator::abort() noexcept {
  for (auto& [dims, c] : state_->groups) V().comm_abort(c);
  state_->groups.clear();
  if (state_->world && !state_->borrowed) V().comm_abort(state_->world);
  state_->world = nullptr;
  state_->all.clear();
}

namespace {
// NcclCommunicator::memory(): device memory on the rank's device and the communicator's stream,
// waiting through the communicator (its watchdog), with no local reductions (NCCL reduces).
class CommMemory final : public nccl_detail::DeviceMemory {
 public:
  explicit CommMemory(NcclCommunicator& c) : DeviceMemory(c.stream()), c_(c) {
    cuda_check(V().get_device(&device_), "cudaGetDevice");
  }
  void* allocate(std::size_t bytes) override {
    if (bytes > 0) cuda_check(V().set_device(device_), "cudaSetDevice");
    return DeviceMemory::allocate(bytes);
  }
  void wait() override { c_.wait(); }
  bool supports(Collective c, DType, ReduceOp) const override { return !reduces(c); }
  void reduce(DType dtype, ReduceOp op, void*, std::span<const void* const>, std::int64_t) override {
    throw InputError(fmt::format("the NCCL backend's memory runs no local reductions ({} of {}): NCCL reduces",
                                 to_string(op), to_string(dtype)));
  }

 private:
  NcclCommunicator& c_;
  int device_ = 0;
};
}  // namespace

Memory& NcclCommunicator::memory() {
  if (!memory_) memory_ = std::make_unique<CommMemory>(*this);
  return *memory_;
}

void NcclCommunicator::wait() {
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  while (true) {
    const int q = V().stream_query(stream_);
    if (q != nv::kCudaSuccess && q != nv::kCudaNotReady) throw_cuda(q, fmt::format("waiting for {} on rank {}", last_op(), rank_));
    // an asynchronous error counts even when the stream has drained: a collective that a peer's
    // abort ended left garbage in its output
    for (nv::Comm c : state_->all) {
      nv::Result async = nv::kSuccess;
      V().comm_get_async_error(c, &async);
      if (async != nv::kSuccess && async != nv::kInProgress) {
        const std::string msg = fmt::format("{} on rank {} failed: NCCL error {} ({}); communicators aborted",
                                            last_op(), rank_, static_cast<int>(async), V().error_string(async));
        abort();
        throw BackendError(msg);
      }
    }
    if (q == nv::kCudaSuccess) return;
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
  cuda_check(V().malloc(&buf, 8 * (n + 1)), "exchange buffer");
  std::vector<std::uint64_t> out(n);
  try {
    auto* mine = static_cast<char*>(buf) + 8 * n;
    cuda_check(V().copy_h2d_async(mine, &value, 8, stream_), "exchange upload");
    Group world;
    for (int d = 0; d < mesh_.ndim(); ++d) world.mesh_dims.push_back(d);
    note("an exchange of one value per rank (all_gather)", world, 1, DType::i64);
    after(V().all_gather(mine, buf, 1, nv::kUint64, state_->world, stream_), state_->world, options_.timeout,
          [&] { return last_op(); }, [this] { abort(); });
    wait();
    cuda_check(V().copy_d2h(out.data(), buf, 8 * n), "exchange download");
  } catch (...) {
    V().free(buf);
    throw;
  }
  V().free(buf);
  return out;  // world ranks are global ranks
}

void* NcclCommunicator::group_comm(const Group& g, const char* op) {
  if (!state_->world) throw BackendError(fmt::format("{}: the communicator was aborted", op));
  if (auto it = state_->groups.find(g.mesh_dims); it != state_->groups.end()) return it->second;
  bool capturing = false;
  cuda_check(V().stream_is_capturing(stream_, &capturing), "cudaStreamIsCapturing");
  if (capturing)
    throw InputError(fmt::format("{} over {}: its communicator does not exist yet and the stream is being captured; call "
                            "NcclCommunicator::prepare (the Executor does) before capturing", op, describe(mesh_, g)));
  // color: this rank's coordinates off the group; key: its position in the group
  std::int64_t color = 0, key = 0;
  for (int m = 0; m < mesh_.ndim(); ++m)
    if (std::find(g.mesh_dims.begin(), g.mesh_dims.end(), m) == g.mesh_dims.end())
      color = color * mesh_.size(m) + coord_[static_cast<std::size_t>(m)];
  for (int m : g.mesh_dims) key = key * mesh_.size(m) + coord_[static_cast<std::size_t>(m)];
  nv::Comm c = nullptr;
  const std::string what = fmt::format("splitting the communicator of {} on rank {}", describe(mesh_, g), rank_);
  const nv::Result r = V().comm_split(state_->world, static_cast<int>(color), static_cast<int>(key), &c, /*blocking=*/false);
  if (r != nv::kSuccess && r != nv::kInProgress) throw_nccl(r, state_->world, what);
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
  try {
    wait_ready(c, options_.timeout, what);
  } catch (...) {
    abort();
    throw;
  }
  state_->groups.emplace(g.mesh_dims, c);
  state_->all.push_back(c);
  return c;
}

void NcclCommunicator::prepare(std::span<const Group> groups) {
  for (const Group& g : groups) {
    for (int m : g.mesh_dims)
      if (m < 0 || m >= mesh_.ndim())
        throw InputError(fmt::format("group over mesh dim {}: mesh {} has {} dims", m, mesh_.str(), mesh_.ndim()));
    (void)group_comm(g, "prepare");
  }
}

bool NcclCommunicator::supports(Collective c, DType dtype, ReduceOp op) const {
  if (!reducible(c, dtype, op)) return false;
  if (!reduces(c)) return true;
  if (dtype == DType::f8e4m3 || dtype == DType::f8e5m2)  // fp8 reductions: NCCL >= 2.24 on sm_90+
    return nccl_version() >= 22400 && state_->cc_major >= 9;
  return true;
}

void NcclCommunicator::all_gather(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) {
  nv::Comm c = group_comm(g, "all_gather");
  note("all_gather", g, count, dtype);
  state_->grouped_on(c);
  after(V().all_gather(send, recv, static_cast<std::size_t>(count), nccl_type(dtype), c, stream_), c, options_.timeout,
        [&] { return last_op(); }, [this] { abort(); });
}

void NcclCommunicator::reduce_scatter(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                                      ReduceOp op) {
  nv::Comm c = group_comm(g, "reduce_scatter");
  note("reduce_scatter", g, count, dtype);
  state_->grouped_on(c);
  after(V().reduce_scatter(send, recv, static_cast<std::size_t>(count), nccl_type(dtype), nccl_op(op, dtype), c, stream_),
        c, options_.timeout, [&] { return last_op() + fmt::format(" op {}", to_string(op)); }, [this] { abort(); });
}

void NcclCommunicator::all_reduce(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype,
                                  ReduceOp op) {
  nv::Comm c = group_comm(g, "all_reduce");
  note("all_reduce", g, count, dtype);
  state_->grouped_on(c);
  after(V().all_reduce(send, recv, static_cast<std::size_t>(count), nccl_type(dtype), nccl_op(op, dtype), c, stream_), c,
        options_.timeout, [&] { return last_op() + fmt::format(" op {}", to_string(op)); }, [this] { abort(); });
}

void NcclCommunicator::all_to_all(const Group& g, const void* send, void* recv, std::int64_t count, DType dtype) {
  nv::Comm c = group_comm(g, "all_to_all");
  note("all_to_all", g, count, dtype);
  state_->grouped_on(c);
  int n = 0;
  V().comm_count(c, &n);
  const auto bytes = count * static_cast<std::int64_t>(itemsize(dtype));
  const auto what = [&] { return last_op(); };
  const auto on_timeout = [this] { abort(); };
  after(V().group_start(), c, options_.timeout, what, on_timeout);
  for (int p = 0; p < n; ++p) {
    after(V().send(static_cast<const char*>(send) + p * bytes, static_cast<std::size_t>(count), nccl_type(dtype), p, c, stream_),
          c, options_.timeout, what, on_timeout);
    after(V().recv(static_cast<char*>(recv) + p * bytes, static_cast<std::size_t>(count), nccl_type(dtype), p, c, stream_), c,
          options_.timeout, what, on_timeout);
  }
  after(V().group_end(), c, options_.timeout, what, on_timeout);
}

void NcclCommunicator::send_recv(std::span<const Transfer> sends, std::span<const Transfer> recvs, DType dtype) {
  if (!state_->world) throw BackendError("send_recv: the communicator was aborted");
  nv::Comm c = state_->world;  // world ranks are global ranks
  note("direct exchange (grouped send/recv)", Group{}, static_cast<std::int64_t>(sends.size() + recvs.size()), dtype);
  const auto what = [&] {
    return fmt::format("grouped send/recv on rank {} ({} sends, {} recvs)", rank_, sends.size(), recvs.size());
  };
  const auto on_timeout = [this] { abort(); };
  after(V().group_start(), c, options_.timeout, what, on_timeout);
  for (const auto& s : sends)
    after(V().send(s.buffer, static_cast<std::size_t>(s.count), nccl_type(dtype), static_cast<int>(s.peer), c, stream_), c,
          options_.timeout, what, on_timeout);
  for (const auto& r : recvs)
    after(V().recv(r.buffer, static_cast<std::size_t>(r.count), nccl_type(dtype), static_cast<int>(r.peer), c, stream_), c,
          options_.timeout, what, on_timeout);
  after(V().group_end(), c, options_.timeout, what, on_timeout);
}

void NcclCommunicator::group_begin() {
  if (!state_->world) throw BackendError("group_begin: the communicator was aborted");
  after(V().group_start(), state_->world, options_.timeout, [&] { return fmt::format("ncclGroupStart on rank {}", rank_); },
        [this] { abort(); });
  ++state_->group_depth;
}

void NcclCommunicator::group_end() {
  if (state_->group_depth == 0) throw InputError("group_end without group_begin");
  const nv::Result r = V().group_end();
  if (--state_->group_depth > 0) {
    if (r != nv::kSuccess && r != nv::kInProgress) throw_nccl(r, state_->world, "ncclGroupEnd (nested)");
    return;
  }
  // the group's collectives start now: wait until every communicator they ran on is past them
  std::vector<nv::Comm> comms;
  comms.swap(state_->in_group);
  if (comms.empty()) comms.push_back(state_->world);
  const auto what = [&] { return fmt::format("grouped collectives on rank {} (last: {})", rank_, last_op()); };
  for (nv::Comm c : comms) after(r, c, options_.timeout, what, [this] { abort(); });
}

void NcclCommunicator::synchronize() {
  // Stream order already sequences every later kernel after the collectives: nothing to wait for.
}

}  // namespace dtensor
