#pragma once
// Controls of the CPU stand-in for NCCL and the CUDA runtime (vendor_cpu.cpp), for tests.
//
// What it reproduces of NCCL 2.28's non-blocking mode: init returns ncclInProgress until every
// rank joined; ncclCommSplit on a non-blocking parent returns ncclSuccess with a NULL handle,
// which is written only when the parent is polled (ncclCommGetAsyncError) after every rank split;
// the first operation on a communicator (connection set-up) and every fifth one after return
// ncclInProgress and stay in progress for a few polls; any call on a communicator still in
// progress fails with ncclInvalidUsage ("Attempt to use communicator before the previous
// operation returned ncclSuccess"); group calls (ncclGroupStart/End) with send/recv matched by
// (peer, order); abort, after which peers waiting on it fail with ncclRemoteError; a member order
// by (key, parent rank). Streams are host queues run in order by one worker thread each, so local
// copies are ordered after collectives as on a GPU.
// What it does not reproduce: NCCL's rounding at every hop of a ring or tree (it reduces as the CPU
// executor does: widened, rounded once), its algorithms, timing and bandwidth, real device memory
// (buffers are host memory), CUDA-graph capture itself (only the capturing flag), and NCCL's own
// error cases beyond those listed.
#include <cstdint>

namespace dtensor::nccl_vendor::cpu {

// A stream: its operations run in issue order on its own worker thread.
void* stream_create();
void stream_destroy(void* stream);
// cudaStreamSynchronize: returns once everything issued on `stream` ran (after a BackendError, a
// caller must drain the stream before freeing buffers its queued copies still use, as on a GPU).
void stream_drain(void* stream);
// What cudaStreamIsCapturing reports for `stream`.
void set_capturing(void* stream, bool capturing);
// How many devices cudaGetDeviceCount reports (default 8).
void set_device_count(int n);

struct Counters {
  std::int64_t in_progress_returns = 0;  // calls that returned ncclInProgress
  std::int64_t deferred_split_handles = 0;  // splits whose handle was NULL when they returned
  std::int64_t invalid_usage = 0;        // calls refused because the communicator was in progress
  std::int64_t aborts = 0;
};
Counters counters();

}  // namespace dtensor::nccl_vendor::cpu
